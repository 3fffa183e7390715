// The hostile-trace corpus of issue #12: damaged copies of the bundled samples, generated here
// (deterministically, from a fixed seed) and run through every CLI verb that reads a trace.
//
//   poolscope_hostile_corpus generate SAMPLES_DIR OUT_DIR
//   poolscope_hostile_corpus run      SAMPLES_DIR OUT_DIR POOLSCOPE_CLI [JOBS [STRIDE [TIME_SCALE]]]
//
// STRIDE runs every STRIDE-th file only; TIME_SCALE multiplies each verb's 30 s limit (CMake
// passes both for the sanitizer builds).
// `run` generates, then runs `info`, `info --json`, `report --json`, `dump`, `whatif --json`,
// `export` (Perfetto JSON, to /dev/null), and `dump` and `export` of a stretch (--from/--to) on
// every file.
// A file passes when no verb ends by a signal or runs past the time limit, a verb that fails says
// why on stderr, and a file whose damage the format can detect (every change to an event chunk
// row or to event_counts, dropped tables and columns) is either refused or warned about. For the
// format-3 copies (checksummed chunks) one more rule: when `dump` neither fails nor warns, it
// prints exactly the events of the undamaged copy (no silent wrong answer).
//
// Every file here is hand-made damage ("fixtures"), not a recording; the undamaged bases are the
// samples as they are (format 1) and rewritten by TraceWriter (format 3).

#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <signal.h>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "poolscope/TraceReader.h"
#include "poolscope/TraceWriter.h"

namespace fs = std::filesystem;
using namespace poolscope;

namespace {

struct Case {
    std::string file;
    std::string base;       // the undamaged file it was made from
    std::string what;       // the damage, for messages
    bool mustFlag = false;  // detectable: some verb's output must refuse or warn
    bool sameEvents = false; // format 3: dump without a warning prints the base's events
};

std::string readAll(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
}

void writeAll(const std::string& path, const std::string& bytes) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Runs sql on a copy of base; false (and no file) when SQLite refuses it or it changes nothing.
bool sqlCopy(const std::string& base, const std::string& out, const std::string& sql) {
    fs::copy_file(base, out, fs::copy_options::overwrite_existing);
    sqlite3* db = nullptr;
    bool ok = sqlite3_open(out.c_str(), &db) == SQLITE_OK;
    if (ok) {
        char* err = nullptr;
        ok = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) == SQLITE_OK &&
             sqlite3_total_changes(db) > 0;
        sqlite3_free(err);
    }
    sqlite3_close(db);
    if (!ok) fs::remove(out);
    return ok;
}

// The same for schema changes (DROP TABLE, ALTER TABLE), which count no changed rows.
bool sqlCopySchema(const std::string& base, const std::string& out, const std::string& sql) {
    fs::copy_file(base, out, fs::copy_options::overwrite_existing);
    sqlite3* db = nullptr;
    bool ok = sqlite3_open(out.c_str(), &db) == SQLITE_OK &&
              sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK;
    sqlite3_close(db);
    if (!ok) fs::remove(out);
    return ok;
}

int64_t queryInt(const std::string& path, const std::string& sql) {
    sqlite3* db = nullptr;
    int64_t v = 0;
    if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
        sqlite3_stmt* st = nullptr;
        if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW)
            v = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    return v;
}

// The sample rewritten by this build's TraceWriter: format 3, checksummed chunks.
bool rewriteV3(const std::string& in, const std::string& out) {
    auto r = TraceReader::open(in);
    if (!r) return false;
    auto w = TraceWriter::create(out);
    if (!w) return false;
    auto p = (*r)->process();
    auto devices = (*r)->devices();
    auto pools = (*r)->pools();
    auto streams = (*r)->streams();
    auto threads = (*r)->threads();
    auto meta = (*r)->meta();
    auto samples = (*r)->samples(0, INT64_MIN, INT64_MAX);
    if (!p || !devices || !pools || !streams || !threads || !meta || !samples) return false;
    bool ok = static_cast<bool>((*w)->setProcess(*p));
    for (const auto& d : *devices) ok &= static_cast<bool>((*w)->addDevice(d));
    for (const auto& x : *pools) ok &= static_cast<bool>((*w)->addPool(x));
    for (const auto& x : *streams) ok &= static_cast<bool>((*w)->addStream(x));
    for (const auto& x : *threads) ok &= static_cast<bool>((*w)->addThread(x));
    for (const auto& [k, v] : *meta)
        if (k != "writer" && k != "schema_version") ok &= static_cast<bool>((*w)->setMeta(k, v));
    ok &= static_cast<bool>((*r)->forEachChunk([&](std::vector<Event>& chunk) {
        return static_cast<bool>((*w)->append(chunk));
    }));
    ok &= static_cast<bool>((*w)->append(*samples));
    ok &= static_cast<bool>((*w)->close());
    return ok;
}

std::vector<Case> generate(const std::string& samplesDir, const std::string& outDir) {
    fs::remove_all(outDir);
    fs::create_directories(outDir);
    std::vector<std::string> bases;
    std::vector<fs::path> samples;
    for (const auto& e : fs::directory_iterator(samplesDir))
        if (e.path().extension() == ".poolscope") samples.push_back(e.path());
    std::sort(samples.begin(), samples.end());
    for (const fs::path& s : samples) {
        const std::string stem = s.stem().string();
        const std::string v1 = outDir + "/" + stem + ".base-v1.poolscope";
        const std::string v3 = outDir + "/" + stem + ".base-v3.poolscope";
        fs::copy_file(s, v1);
        bases.push_back(v1);
        if (rewriteV3(s.string(), v3)) bases.push_back(v3);
        else std::fprintf(stderr, "cannot rewrite %s as format 3\n", s.c_str());
    }

    std::vector<Case> cases;
    std::mt19937_64 rng(12);
    for (size_t b = 0; b < bases.size(); ++b) {
        const std::string& base = bases[b];
        const bool v3 = base.find(".base-v3.") != std::string::npos;
        const std::string stem = fs::path(base).stem().string();
        int n = 0;
        auto name = [&](const char* tag) {
            return outDir + "/" + stem + "." + tag + "-" + std::to_string(n++) + ".poolscope";
        };
        auto add = [&](const std::string& file, std::string what, bool mustFlag, bool same) {
            cases.push_back({file, base, std::move(what), mustFlag, same && v3});
        };
        const std::string bytes = readAll(base);
        // Byte flips and overwritten runs anywhere in the file.
        for (int i = 0; i < 6; ++i) {
            std::string d = bytes;
            const size_t at = rng() % d.size();
            d[at] = static_cast<char>(d[at] ^ static_cast<char>(1 + rng() % 255));
            const std::string f = name("flip");
            writeAll(f, d);
            add(f, "byte " + std::to_string(at) + " flipped", false, true);
        }
        for (int i = 0; i < 2; ++i) {
            std::string d = bytes;
            const size_t at = rng() % d.size();
            for (size_t k = at; k < std::min(d.size(), at + 64); ++k)
                d[k] = static_cast<char>(rng());
            const std::string f = name("garbage");
            writeAll(f, d);
            add(f, "64 bytes overwritten at " + std::to_string(at), false, true);
        }
        // Truncations.
        for (size_t keep : {bytes.size() / 3, bytes.size() * 2 / 3, bytes.size() - 1,
                            bytes.size() > 8192 ? bytes.size() - 8192 : size_t{100}}) {
            const std::string f = name("trunc");
            writeAll(f, bytes.substr(0, keep));
            add(f, "truncated to " + std::to_string(keep) + " bytes", false, true);
        }
        const int64_t chunks = queryInt(base, "SELECT count(*) FROM event_chunks");
        const int64_t pick = chunks ? 1 + static_cast<int64_t>(rng() % uint64_t(chunks)) : 1;
        const std::string row = " WHERE id = (SELECT id FROM event_chunks ORDER BY id LIMIT 1 "
                                "OFFSET " + std::to_string(pick - 1) + ")";
        auto sqlCase = [&](const char* tag, const std::string& sql, std::string what,
                           bool mustFlag, bool same = true) {
            const std::string f = name(tag);
            if (sqlCopy(base, f, sql)) add(f, std::move(what), mustFlag, same);
        };
        // Chunk blobs: one byte changed (same length), shortened, lengthened.
        sqlCase("blob", "UPDATE event_chunks SET data = CAST(substr(data,1,length(data)/2) || "
                        "CASE WHEN substr(data,length(data)/2+1,1) = x'5a' THEN x'a5' ELSE x'5a' "
                        "END || substr(data,length(data)/2+2) AS BLOB)" + row,
                "a byte of chunk " + std::to_string(pick) + "'s data changed", v3);
        sqlCase("blob",
                "UPDATE event_chunks SET data = CAST(substr(data,1,length(data)-3) AS BLOB)" + row,
                "chunk data shortened", true);
        sqlCase("blob", "UPDATE event_chunks SET data = CAST(data || x'00' AS BLOB)" + row,
                "chunk data lengthened", true);
        // Chunk headers: impossible or merely wrong values, column by column.
        std::vector<std::string> cols = {"first_seq", "last_seq", "t_min", "t_max",
                                         "count",     "kinds",    "codec"};
        if (v3) cols.insert(cols.end(), {"prev_last_seq", "crc"});
        const char* values[] = {"-1", "9223372036854775807", "4294967299", "'x'", "0", "+1"};
        for (const std::string& c : cols) {
            for (int k = 0; k < 2; ++k) {
                const std::string v = values[rng() % std::size(values)];
                const std::string expr = v == "+1" ? c + " + 1" : v;
                sqlCase("header", "UPDATE event_chunks SET " + c + " = " + expr + row + " AND " +
                                      c + " IS NOT " + expr,
                        "chunk " + std::to_string(pick) + " " + c + " = " + expr, true);
            }
        }
        // Chunk rows deleted, all deleted, duplicated, reordered, relabelled.
        sqlCase("rows", "DELETE FROM event_chunks" + row, "a chunk row deleted", true);
        sqlCase("rows", "DELETE FROM event_chunks", "every chunk row deleted", true);
        sqlCase("rows",
                std::string("INSERT INTO event_chunks(first_seq,last_seq,t_min,t_max,count,kinds,"
                            "codec,data") + (v3 ? ",prev_last_seq,crc" : "") +
                    ") SELECT first_seq,last_seq,t_min,t_max,count,kinds,codec,data" +
                    (v3 ? ",prev_last_seq,crc" : "") + " FROM event_chunks" + row,
                "a chunk row duplicated", true);
        if (chunks >= 2)
            sqlCase("rows", "UPDATE event_chunks SET id = -id WHERE id = (SELECT min(id) FROM "
                            "event_chunks); UPDATE event_chunks SET id = (SELECT max(id) FROM "
                            "event_chunks) + 1 WHERE id < 0",
                    "the first chunk row moved to the end", true);
        sqlCase("rows", "UPDATE event_chunks SET codec = 1" + row + " AND codec != 1",
                "a chunk relabelled codec 1", true);
        // chunk_index (no chunk crc covers it; its own checksum must): a row that fails it and
        // a row deleted are reported (`info`), and every verb still reads every event.
        if (v3) {
            sqlCase("index", "UPDATE chunk_index SET crc = crc + 1 WHERE chunk = (SELECT min(chunk) "
                             "FROM chunk_index)", "a chunk_index row's checksum wrong", true);
            sqlCase("index", "DELETE FROM chunk_index WHERE chunk = (SELECT max(chunk) FROM "
                             "chunk_index)", "a chunk_index row deleted", true);
        }
        // chunk_headers (the copy of each chunk's prev_last_seq and crc, and its events per
        // kind; its own row_crc binds it to the chunk): a row that fails it, a row deleted, a
        // copy that says another crc, counts that are not a blob, and the chunk's own crc
        // changed under an intact copy. Each is named; only the last loses events (its chunk).
        if (v3 && queryInt(base, "SELECT count(*) FROM sqlite_master WHERE name='chunk_headers'")) {
            sqlCase("headers", "UPDATE chunk_headers SET row_crc = row_crc + 1 WHERE chunk = "
                               "(SELECT min(chunk) FROM chunk_headers)",
                    "a chunk_headers row's checksum wrong", true);
            sqlCase("headers", "DELETE FROM chunk_headers WHERE chunk = (SELECT max(chunk) FROM "
                               "chunk_headers)", "a chunk_headers row deleted", true);
            sqlCase("headers", "UPDATE chunk_headers SET crc = crc + 1, kind_counts = 'x'",
                    "every chunk_headers row rewritten", true);
            sqlCase("headers", "UPDATE event_chunks SET crc = crc + 1" + row,
                    "chunk " + std::to_string(pick) + "'s crc changed, its copy intact", true);
        }
        // event_counts: impossible values, emptied, unknown kinds.
        sqlCase("counts", "UPDATE event_counts SET count = 9223372036854775807 WHERE kind = "
                          "(SELECT min(kind) FROM event_counts)", "a count of 2^63-1", true);
        sqlCase("counts", "UPDATE event_counts SET count = 500000000 WHERE kind = "
                          "(SELECT max(kind) FROM event_counts)", "a count of 5e8", true);
        sqlCase("counts", "UPDATE event_counts SET count = -5 WHERE kind = "
                          "(SELECT min(kind) FROM event_counts)", "a negative count", true);
        sqlCase("counts", "UPDATE event_counts SET count = 'x'", "counts not numbers", true);
        sqlCase("counts", "DELETE FROM event_counts", "event_counts emptied", true);
        sqlCase("counts", "INSERT INTO event_counts VALUES(99, 1)", "an unknown kind", true);
        // Per-chunk pool summaries (written by TraceWriter, so on the format-3 bases): a row
        // changed, a chunk's rows deleted, impossible values. Each costs chunks their summary
        // and is named; the events are untouched.
        if (v3 && queryInt(base, "SELECT count(*) FROM pool_chunk_summary") > 0) {
            sqlCase("summary", "UPDATE pool_chunk_summary SET reserved_max = reserved_max + 1 "
                               "WHERE chunk = (SELECT id FROM event_chunks" + row + ")",
                    "a pool summary row of chunk " + std::to_string(pick) + " changed", true);
            sqlCase("summary", "DELETE FROM pool_chunk_summary WHERE chunk = (SELECT id FROM "
                               "event_chunks" + row + ")",
                    "chunk " + std::to_string(pick) + "'s pool summary rows deleted", true);
            sqlCase("summary", "UPDATE pool_chunk_summary SET t_min = 9223372036854775807, "
                               "chunk_rows = -1, used_max = 'x'",
                    "impossible pool summary values", true);
        }
        // Impossible values elsewhere: must not crash (no checksum covers these tables).
        sqlCase("values", "UPDATE samples SET ts_ns = -9223372036854775808 WHERE id = (SELECT "
                          "min(id) FROM samples)", "a sample at INT64_MIN", false, false);
        sqlCase("values", "UPDATE samples SET reserved = -1, used = 9223372036854775807",
                "impossible watermarks", false, false);
        sqlCase("values", "UPDATE pools SET device = 1099511627776, kind = 99",
                "impossible pool fields", false, false);
        sqlCase("values", "UPDATE process SET start_mono_ns = 9223372036854775807",
                "impossible process start", false, false);
        // Dropped tables and columns (on two bases only: the same on every base).
        if (stem.rfind("pools.", 0) == 0) {
            for (const char* t : {"meta", "process", "devices", "pools", "streams", "threads",
                                  "event_chunks", "event_counts", "samples"}) {
                const std::string f = name("drop");
                if (sqlCopySchema(base, f, std::string("DROP TABLE ") + t))
                    add(f, std::string("table ") + t + " dropped", true, false);
            }
            for (const char* tc : {"event_chunks kinds", "event_chunks data", "event_chunks crc",
                                   "event_counts count", "samples used", "process host",
                                   "streams priority"}) {
                std::string t(tc);
                const std::string table = t.substr(0, t.find(' ')), col = t.substr(t.find(' ') + 1);
                const std::string f = name("dropcol");
                if (sqlCopySchema(base, f, "ALTER TABLE " + table + " DROP COLUMN " + col))
                    add(f, "column " + table + "." + col + " dropped", true, false);
            }
        }
    }
    return cases;
}

struct Run {
    bool signaled = false, timedOut = false;
    int exitCode = 0, signal = 0;
    std::string out, err;
};

// Each verb's limit: kVerbSeconds times the build's scale (a sanitized CLI is 3-10x slower). A
// run past it is a hang, and fails.
constexpr int kVerbSeconds = 30;
int verbLimitSeconds = kVerbSeconds;

// env: NAME=value settings for the run alone.
Run runCli(const std::string& cli, const std::vector<std::string>& args, const std::string& tmp,
           const std::vector<std::string>& env = {}) {
    Run r;
    const std::string outPath = tmp + ".out", errPath = tmp + ".err";
    pid_t pid = ::fork();
    if (pid == 0) {
        for (const std::string& kv : env) {
            const size_t eq = kv.find('=');
            ::setenv(kv.substr(0, eq).c_str(), kv.substr(eq + 1).c_str(), 1);
        }
        const int o = ::open(outPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        const int e = ::open(errPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        ::dup2(o, 1);
        ::dup2(e, 2);
        std::vector<char*> argv;
        argv.push_back(const_cast<char*>(cli.c_str()));
        for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        ::execv(cli.c_str(), argv.data());
        ::_exit(127);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(verbLimitSeconds);
    int status = 0;
    for (;;) {
        const pid_t w = ::waitpid(pid, &status, WNOHANG);
        if (w == pid) break;
        if (std::chrono::steady_clock::now() > deadline) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, &status, 0);
            r.timedOut = true;
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    if (!r.timedOut && WIFSIGNALED(status)) {
        r.signaled = true;
        r.signal = WTERMSIG(status);
    }
    r.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = readAll(outPath);
    r.err = readAll(errPath);
    fs::remove(outPath);
    fs::remove(errPath);
    return r;
}

bool flagged(const Run& r) {
    return (r.exitCode != 0 && !r.err.empty()) ||
           r.err.find("warning") != std::string::npos || r.err.find("damaged") != std::string::npos;
}

int runCorpus(const std::string& samplesDir, const std::string& outDir, const std::string& cli,
              int jobs, int stride) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<Case> cases = generate(samplesDir, outDir);
    // Every stride-th file only (the sanitizer builds, where each CLI run is several times
    // slower): the same files on every run.
    if (stride > 1) {
        std::vector<Case> kept;
        for (size_t i = 0; i < cases.size(); i += size_t(stride)) kept.push_back(cases[i]);
        cases = std::move(kept);
    }
    const std::vector<std::vector<std::string>> verbs = {
        {"info"}, {"info", "--json"}, {"report", "--json"}, {"dump"}, {"whatif", "--json"},
        {"export", "-o", "/dev/null"},
        // A stretch (from the start, so valid whatever the trace's length): the range read of
        // `dump`, the range build and clipped writer of `export`.
        {"dump", "--from", "0ns", "--to", "1s"}, {"export", "--from", "0ns", "--to", "1s", "-o", "/dev/null"},
        // On the threads a machine with more CPUs uses (threadedEnv): the names pass and the
        // models' replays decoded on several threads, the models over several replays.
        {"dump", "--names"}, {"advise", "--json"},
        // The damaged file against itself: both sides' streaming reads and the diff's facts;
        // and merged with itself (the names pass, the tables beside it).
        {"diff", "--json"}, {"merge", "--json"}};
    const std::vector<std::string> threadedEnv = {"POOLSCOPE_DECODE_THREADS=3", "POOLSCOPE_PREDICT_REPLAYS=3"};
    auto threaded = [](const std::vector<std::string>& verb) {
        return verb == std::vector<std::string>{"dump", "--names"} || verb == std::vector<std::string>{"advise", "--json"};
    };
    // What `dump` prints of the undamaged copy. (Not the stretch's: its events depend on the
    // trace's start, which the samples table sets too, and no checksum covers a sample's time: a
    // flipped bit there moves the start, as it moves `info`'s span and the window's axis.)
    std::map<std::string, std::string> baseDump;
    for (const Case& c : cases)
        if (c.sameEvents && !baseDump.count(c.base)) {
            Run d = runCli(cli, {"dump", c.base}, outDir + "/base");
            if (d.exitCode != 0 || !d.err.empty()) {
                std::fprintf(stderr, "FAIL: the undamaged %s does not dump cleanly: %s\n",
                             c.base.c_str(), d.err.c_str());
                return 1;
            }
            baseDump[c.base] = d.out;
        }
    std::atomic<size_t> next{0};
    std::mutex m;
    std::vector<std::string> failures;
    size_t flaggedFiles = 0;
    auto worker = [&](int id) {
        const std::string tmp = outDir + "/run" + std::to_string(id);
        for (size_t i; (i = next++) < cases.size();) {
            const Case& c = cases[i];
            bool any = false;
            std::vector<std::string> why;
            for (const auto& verb : verbs) {
                std::vector<std::string> args = verb;
                args.push_back(c.file);
                if (verb.front() == "diff" || verb.front() == "merge") args.push_back(c.file);
                const Run r = runCli(cli, args, tmp, threaded(verb) ? threadedEnv : std::vector<std::string>{});
                std::string v;
                for (const auto& a : verb) v += (v.empty() ? "" : " ") + a;
                if (r.signaled)
                    why.push_back(v + ": killed by signal " + std::to_string(r.signal) + " " +
                                  r.err.substr(0, 300));
                if (r.timedOut)
                    why.push_back(v + ": did not finish in " + std::to_string(verbLimitSeconds) +
                                  " s");
                // A sanitized CLI (debug preset) reports and exits 1 with a message: that is a
                // bug found, not a clear error.
                for (const char* report : {"AddressSanitizer", "LeakSanitizer", "runtime error:"})
                    if (r.err.find(report) != std::string::npos)
                        why.push_back(v + ": " + report + " report: " + r.err.substr(0, 600));
                if (!r.signaled && !r.timedOut && r.exitCode != 0 && r.err.empty())
                    why.push_back(v + ": exit " + std::to_string(r.exitCode) +
                                  " without a message");
                const bool f = flagged(r);
                any |= f;
                if (c.sameEvents && verb == std::vector<std::string>{"dump"} && !f && r.exitCode == 0 &&
                    r.out != baseDump.at(c.base))
                    why.push_back(v + ": different events, exit 0 and no warning (a silent wrong "
                                  "answer)");
            }
            if (c.mustFlag && !any)
                why.push_back("no verb refused the file or warned about its damage");
            std::lock_guard lock(m);
            flaggedFiles += any;
            for (const auto& w : why)
                failures.push_back(fs::path(c.file).filename().string() + " (" + c.what +
                                   "): " + w);
        }
    };
    std::vector<std::thread> threads;
    for (int j = 0; j < jobs; ++j) threads.emplace_back(worker, j);
    for (auto& t : threads) t.join();
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (const auto& f : failures) std::fprintf(stderr, "FAIL: %s\n", f.c_str());
    std::printf("%zu damaged files x %zu verbs in %.1f s: %zu refused or warned about, %zu "
                "failures\n",
                cases.size(), verbs.size(), secs, flaggedFiles, failures.size());
    return failures.empty() ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
    if (argc >= 4 && std::strcmp(argv[1], "generate") == 0) {
        const auto cases = generate(argv[2], argv[3]);
        for (const Case& c : cases)
            std::printf("%s\t%s%s\n", fs::path(c.file).filename().c_str(), c.what.c_str(),
                        c.mustFlag ? "\t(must be refused or warned about)" : "");
        return 0;
    }
    if (argc >= 5 && std::strcmp(argv[1], "run") == 0) {
        if (argc >= 8) verbLimitSeconds = kVerbSeconds * std::clamp(std::atoi(argv[7]), 1, 100);
        return runCorpus(argv[2], argv[3], argv[4], argc >= 6 ? std::atoi(argv[5]) : 2,
                         argc >= 7 ? std::max(1, std::atoi(argv[6])) : 1);
    }
    std::fprintf(stderr, "usage: %s generate SAMPLES_DIR OUT_DIR\n"
                         "       %s run SAMPLES_DIR OUT_DIR POOLSCOPE_CLI [JOBS [STRIDE [TIME_SCALE]]]\n",
                 argv[0], argv[0]);
    return 2;
}
