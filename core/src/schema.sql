-- PoolScope trace schema, version 7.
--
-- A trace is one SQLite file (extension .poolscope) identified by
--   PRAGMA application_id = 1347634000  (0x50534350, 'PSCP')
--   PRAGMA user_version   = 7           (this schema's version)
-- The schema grows only by adding tables and columns under a higher user_version; a reader opens
-- every version up to its own and refuses newer ones with a plain message.
-- History: 1 = event chunks in codec 1 or 2. 2 = the same tables; chunks may be codec 3, so a
-- reader of version 1 (which would call codec 3 "damaged") says "newer PoolScope" instead.
-- 3 = event_chunks gains prev_last_seq and crc (chunk integrity, issue #12): a reader of version
-- 3 detects damaged, deleted, duplicated or relabelled chunk rows and still reads the intact
-- ones. Versions 1 and 2 (no such columns) are still read, with the checks that need no
-- checksum (headers decoded and compared, sequence overlaps, event_counts against the chunks).
-- 4 = call sites (issue #13): chunks may be codec 4 (events carry a site id), and the tables
-- modules, native_frames, python_frames, nvtx_paths, sites, symbols and nvtx_ranges. A reader
-- of version 3 refuses version 4 as a newer PoolScope's; files of versions 1-3 have no such
-- tables and read as "no stacks recorded".
-- 5 = the same tables; chunks may be codec 5 (zstd-compressed, issue #15; written where
-- libzstd is found, codec 4 elsewhere), and events may be of the beyond-pool kinds (issue #18:
-- device_alloc and later, legacy device memory and pinned host memory) in any codec; a trace of
-- version 4 or lower holding one is damaged. A reader of version 4 refuses it as a newer PoolScope's
-- rather than calling small compressed chunks "too short".
-- 6 = the same tables; events may be peer copies (issue #19: peer_copy, cuMemcpyPeer(Async)
-- between two devices); a trace of version 5 or lower holding one is damaged, and a reader of
-- version 5 refuses a version-6 trace as a newer PoolScope's instead of dropping its chunks.
-- 7 = the same tables; chunks may be codec 6 (codec 5 with frees and reuses predicted from the
-- chunk's own blocks, issue #15; written where libzstd is found). A reader of version 6 refuses
-- it as a newer PoolScope's rather than calling small compressed chunks "too short".
--
-- Conventions
-- * Handles (CUstream, CUmemoryPool, CUevent, device pointers) are 64-bit unsigned values stored
--   bit-for-bit in SQLite's signed INTEGER: read them back as uint64.
-- * Times are CLOCK_MONOTONIC nanoseconds of the recording host (ts_ns). process.start_mono_ns
--   and process.start_unix_ns map them to wall-clock time.
-- * Enumerations (events.kind, variant, attr) are listed in the lookup tables below and in
--   core/include/poolscope/Event.h, which is the authority.

CREATE TABLE meta (            -- free-form facts: writer, dropped_events, disabled_reason...
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);

CREATE TABLE process (         -- exactly one row: the recorded process
  pid               INTEGER NOT NULL,
  parent_pid        INTEGER NOT NULL DEFAULT 0, -- set when a forked child wrote its own trace
  command_line      TEXT    NOT NULL DEFAULT '',
  start_unix_ns     INTEGER NOT NULL DEFAULT 0,
  start_mono_ns     INTEGER NOT NULL DEFAULT 0,
  host              TEXT    NOT NULL DEFAULT '',
  driver_version    INTEGER NOT NULL DEFAULT 0, -- cuDriverGetVersion, e.g. 13000
  runtime_version   INTEGER NOT NULL DEFAULT 0, -- 0 when unknown
  collector_version TEXT    NOT NULL DEFAULT ''
);

CREATE TABLE devices (
  ordinal      INTEGER PRIMARY KEY,
  name         TEXT    NOT NULL DEFAULT '',
  total_memory INTEGER NOT NULL DEFAULT 0,
  uuid         TEXT    NOT NULL DEFAULT ''
);

CREATE TABLE pools (
  handle        INTEGER PRIMARY KEY,
  device        INTEGER NOT NULL DEFAULT -1,
  kind          INTEGER NOT NULL DEFAULT 0,   -- 0 unknown, 1 default, 2 explicit, 3 imported
  handle_types  INTEGER NOT NULL DEFAULT 0,   -- CUmemAllocationHandleType bits
  location_type INTEGER NOT NULL DEFAULT 0,   -- CUmemLocationType
  location_id   INTEGER NOT NULL DEFAULT 0,
  max_size      INTEGER NOT NULL DEFAULT 0,   -- 0 = no limit
  created_ns    INTEGER NOT NULL DEFAULT 0    -- 0 = existed before the collector saw it
);

CREATE TABLE streams (
  handle          INTEGER PRIMARY KEY,        -- 0 is the legacy default stream
  -- Never filled and no longer read or written; kept in the table because readers of this
  -- format version from before 2026-11-24 select it, and they must open new files too.
  cupti_stream_id INTEGER NOT NULL DEFAULT 0,
  device          INTEGER NOT NULL DEFAULT -1,
  priority        INTEGER NOT NULL DEFAULT 0,
  flags           INTEGER NOT NULL DEFAULT 0,
  priority_known  INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE threads (
  tid  INTEGER PRIMARY KEY,
  name TEXT NOT NULL DEFAULT ''
);

-- Events: one per intercepted call (or pool activity record), column meaning per kind as
-- documented on poolscope::EventKind. Failed calls are kept with their CUresult (an OOM is 2).
--
-- They are stored in chunks: runs of consecutive events (by seq) encoded with the codec of
-- core/include/poolscope/EventCodec.h (its header comment specifies every version byte for byte).
-- Version 6 (since format 7) is version 5 whose frees name a block allocated earlier in the
-- chunk by its rank (and reused pointers a recent free by its depth) instead of a pointer delta:
-- ~2.5-8 bytes an event (written where libzstd is found). Version 5 (since format 5) is version
-- 4 of predicted events, regrouped by field and compressed with zstd: ~4.5-9 bytes an event. Version 4 (since format 4) is version 3 plus each event's site. Version 3, written since 2026-11-22: per field the zigzagged delta from the previous event
-- as 0-8 raw little-endian bytes, their lengths as 3-bit codes in a 5-byte header per event,
-- ~20-26 bytes an event. Versions 1 and 2 (LEB128 varints) are still read. A chunk's `codec`
-- says which; a reader refuses a codec above its own as a trace from a newer PoolScope.
-- Why: one SQLite row per event tops out near 0.4 M events/s on a small machine, while a tight
-- cudaMallocAsync loop produces over 1 M/s; chunks write at several million per second and make
-- a 10 M-event trace about 200 MB instead of 700. `poolscope dump TRACE` prints events as rows.
CREATE TABLE event_chunks (
  id        INTEGER PRIMARY KEY,
  first_seq INTEGER NOT NULL,
  last_seq  INTEGER NOT NULL,
  t_min     INTEGER NOT NULL,                 -- smallest ts_ns in the chunk
  t_max     INTEGER NOT NULL,                 -- largest ts_ns in the chunk
  count     INTEGER NOT NULL,
  kinds     INTEGER NOT NULL,                 -- bit (1 << kind) set for each kind present
  codec     INTEGER NOT NULL DEFAULT 2,       -- EventCodec version (1 to 6; the writer sets it)
  data      BLOB    NOT NULL,
  -- Since version 3. prev_last_seq: last_seq of the previous chunk in seq order (0 for the
  -- first), so that a deleted chunk row leaves a visible hole. crc: CRC32C (Castagnoli) of
  -- first_seq, last_seq, prev_last_seq, t_min, t_max, count, kinds, codec as eight 64-bit
  -- little-endian words, then of data (poolscope::schema::chunkChecksum), as 0..2^32-1.
  prev_last_seq INTEGER NOT NULL DEFAULT 0,
  crc           INTEGER NOT NULL DEFAULT 0
);
-- A chunk holds 1..4096 events (schema::kChunkEvents); chunks do not overlap in seq (seqs have
-- gaps: samples and dropped events take numbers too). A reader checks every row against these
-- rules and the crc, and event_counts against the sum of the chunks' counts; a row that fails is
-- reported as damaged (with its event count) and skipped, the rest of the trace still reads.
CREATE INDEX event_chunks_by_time ON event_chunks(t_min, t_max);

-- Per event chunk, what the events table's filters (poolscope/view/EventFilter.h) test besides
-- time and kind, so that a filter passes over chunks that cannot match without decoding them
-- (issue #15). One row per chunk, written with it in the same transaction. Written since
-- 2026-11-26 without a version change, like drop_gaps: it only adds information, a reader that
-- predates it ignores it, and a trace without it (or a chunk without a row) is decoded.
-- No chunk crc covers these rows, so each has its own: a row that fails it, is listed twice, or
-- is missing gives its chunk no index (decoded), and the reader reports it (tableDamage()).
-- Rows of chunks the reader refuses are ignored, and so is the table in a trace of version 1 or 2
-- (no chunk crc to bind a row to its chunk's data).
CREATE TABLE chunk_index (
  chunk    INTEGER PRIMARY KEY,               -- event_chunks.id
  -- 64-bit blooms: for each event (any kind) two bits of its stream handle / pool handle, bits
  -- h & 63 and (h >> 6) & 63 of h = murmur3's 64-bit finalizer of the handle
  -- (ChunkIndexRow::bloomBits).
  streams  INTEGER NOT NULL,
  pools    INTEGER NOT NULL,
  failed   INTEGER NOT NULL,                  -- events with result != 0
  size_min INTEGER NOT NULL,                  -- smallest size of an alloc or free event
  size_max INTEGER NOT NULL,                  -- largest; size_min > size_max (as unsigned): none
  -- CRC32C of the chunk's eight header words (as in event_chunks.crc), its crc, then streams,
  -- pools, failed, size_min, size_max, each a 64-bit little-endian word
  -- (poolscope::schema::chunkIndexChecksum), as 0..2^32-1.
  crc      INTEGER NOT NULL
);

-- Per event chunk, a copy of the two header columns stored after its data (prev_last_seq and crc:
-- reading them from event_chunks walks each chunk's overflow pages, i.e. the whole file) and its
-- events per kind, so that opening a trace reads headers only and a kind filter knows its row
-- count without decoding (issue #15). One row per chunk, written with it in the same
-- transaction. Written since 2026-11-27 without a version change, like chunk_index: a reader that
-- predates it ignores it, and a trace without it (or a chunk without a usable row) is read from
-- event_chunks as before. row_crc binds the row to its chunk's other columns: a row that fails it
-- (or a chunk whose header changed) is not used, and that chunk's two columns are read from
-- event_chunks. Whenever a chunk's data is read, its own prev_last_seq and crc are read too and
-- win over the copy; a copy that disagrees is reported (tableDamage()) and the reader stops
-- using the table. Ignored in a trace of version 1 or 2 (no such columns).
-- Since 2026-11-28 (no version change) the row also copies the chunk's other header columns and
-- its data's length (first_seq .. data_bytes below): with them a header scan reads no page of
-- event_chunks at all (at 1 G events it read one per chunk, 245 k pages: most of the window's
-- first frame). The chunk ids are then taken from the index event_chunks_by_time (a deleted
-- chunk row is gone from it too), and a row whose t_min/t_max differ from the index's, or that
-- fails row_crc over its own copied columns, gives its chunk a lookup of its own row (reported
-- as above). A chunk's own columns are read with its data and win, as for prev_last_seq and
-- crc. A trace whose table lacks these columns (written before) is scanned as described above.
CREATE TABLE chunk_headers (
  chunk         INTEGER PRIMARY KEY,          -- event_chunks.id
  prev_last_seq INTEGER NOT NULL,             -- event_chunks.prev_last_seq
  crc           INTEGER NOT NULL,             -- event_chunks.crc
  -- For each bit set in event_chunks.kinds, lowest first, the chunk's number of events of that
  -- kind as a 16-bit little-endian integer (each 1..4096, their sum the chunk's count).
  kind_counts   BLOB    NOT NULL,
  -- CRC32C of the chunk's eight header words (with this prev_last_seq, as in event_chunks.crc),
  -- this crc and length(event_chunks.data) as 64-bit little-endian words, then of kind_counts
  -- (poolscope::schema::chunkHeaderRowChecksum), as 0..2^32-1. The copied columns below are
  -- those words, so the same checksum covers them.
  row_crc       INTEGER NOT NULL,
  first_seq     INTEGER,                      -- event_chunks.first_seq (NULL: not copied)
  last_seq      INTEGER,                      -- event_chunks.last_seq
  t_min         INTEGER,                      -- event_chunks.t_min
  t_max         INTEGER,                      -- event_chunks.t_max
  count         INTEGER,                      -- event_chunks.count
  kinds         INTEGER,                      -- event_chunks.kinds
  codec         INTEGER,                      -- event_chunks.codec
  data_bytes    INTEGER                       -- length(event_chunks.data)
);

-- Events per kind, kept current by the writer at each commit (cheap counts without decoding), in
-- the same transaction as the chunks: their sum equals the sum of event_chunks.count.
CREATE TABLE event_counts (
  kind  INTEGER PRIMARY KEY,                  -- event_kinds.id
  count INTEGER NOT NULL
);

-- Periodic watermark samples (the sampler thread), between events.
CREATE TABLE samples (
  id            INTEGER PRIMARY KEY,
  ts_ns         INTEGER NOT NULL,
  pool          INTEGER NOT NULL,
  reserved      INTEGER NOT NULL,
  reserved_high INTEGER NOT NULL,
  used          INTEGER NOT NULL,
  used_high     INTEGER NOT NULL,
  source        INTEGER NOT NULL DEFAULT 1    -- 1 periodic
);
CREATE INDEX samples_by_pool_time ON samples(pool, ts_ns);

-- Where the collector lost events (issue #11): a thread's ring was full because the writer fell
-- behind. One row per gap, from the first lost event's time to the last's; meta.dropped_events
-- is the total. Written since 2026-11-24 without a version change: it only adds information, a
-- reader that predates it ignores it, and a trace without it has no gaps to show.
CREATE TABLE drop_gaps (
  ts_ns       INTEGER NOT NULL,
  duration_ns INTEGER NOT NULL DEFAULT 0,
  tid         INTEGER NOT NULL DEFAULT 0,
  count       INTEGER NOT NULL
);

-- The settable attributes of each pool (the three reuse policies and the release threshold) as
-- the driver reported them when the collector first saw the pool (issue #17): a pool whose
-- policies the program never set showed "unknown". Changes after that are events
-- (pool_set_attribute, knob_change). Written since 2026-11-25 without a version change, like
-- drop_gaps: it only adds information, a reader that predates it ignores it, and a trace without
-- it shows such values as unknown.
CREATE TABLE pool_initial_attributes (
  pool  INTEGER NOT NULL,                     -- pools.handle
  attr  INTEGER NOT NULL,                     -- pool_attributes.id: 1-3 the reuse policies, 4 the threshold
  value INTEGER NOT NULL,                     -- 0 off / 1 on; the threshold in bytes
  PRIMARY KEY (pool, attr)
) WITHOUT ROWID;

-- Each event chunk's watermarks per pool (issue #15: the window's overview and `info`'s peaks
-- without decoding a chunk): one row per pool that the chunk's events with watermarks
-- (kHasWatermarks) name, over those events only: their time range, the least and greatest
-- reserved and used bytes, and the values of the last of them in seq order (in force at the
-- chunk's end). A chunk without such an event has one row of pool 0 (zeros), so that every
-- chunk has rows and a missing one is seen. Written since 2026-11-24 without a version change,
-- like drop_gaps: a reader that predates it ignores it, and a trace without it has no
-- overview (readers decode events instead). crc: CRC32C of chunk, pool, chunk_rows, t_min,
-- t_max, reserved_min, reserved_max, used_min, used_max, reserved_last, used_last as eleven
-- 64-bit little-endian words, then the chunk's crc as a 32-bit little-endian word
-- (poolscope::schema::poolSummaryChecksum), as 0..2^32-1: a row changed or moved to another
-- chunk fails it. A chunk whose rows do not all hold up (chunk_rows of them, each checked) has
-- no summary, and TraceReader::tableDamage() says so; rows of a chunk that is not there or
-- is itself damaged are passed over (that damage is named with the chunk's).
CREATE TABLE pool_chunk_summary (
  chunk         INTEGER NOT NULL,             -- event_chunks.id
  pool          INTEGER NOT NULL,             -- pools.handle; 0: the chunk has no watermarks
  chunk_rows    INTEGER NOT NULL,             -- how many rows this chunk has (1..4096)
  t_min         INTEGER NOT NULL,
  t_max         INTEGER NOT NULL,
  reserved_min  INTEGER NOT NULL,
  reserved_max  INTEGER NOT NULL,
  used_min      INTEGER NOT NULL,
  used_max      INTEGER NOT NULL,
  reserved_last INTEGER NOT NULL,
  used_last     INTEGER NOT NULL,
  crc           INTEGER NOT NULL,
  PRIMARY KEY (chunk, pool)
) WITHOUT ROWID;

-- The same watermarks over blocks of schema::kBlockChunks (64) consecutive event chunks, per
-- pool (issue #15): what the window's first view of a large trace is drawn from before every
-- chunk's rows are read (at 1 G events 7.6 k rows instead of 490 k). Rows are written when a
-- block is complete and, for the last (shorter) block, at close; a trace still being written, or
-- one whose writer did not close, has chunks after the last block and is drawn from
-- pool_chunk_summary. Written since 2026-11-28 without a version change, like
-- pool_chunk_summary: a reader that predates it ignores it, and a trace without it is drawn
-- from the per-chunk rows as before. A block covers the chunk ids first_chunk..last_chunk; the
-- blocks must follow one another without a gap up to the last chunk's id, each block's rows
-- must all be there (block_rows) and pass their crc, else none is used (tableDamage() says
-- why) and the first view waits for the per-chunk rows, as before. No chunk crc covers these
-- rows (they are read before the chunks), so once the per-chunk rows are read each block is
-- compared with their merge: a block that differs is reported and the overview is the one of
-- the per-chunk rows.
CREATE TABLE pool_block_summary (
  first_chunk   INTEGER NOT NULL,             -- event_chunks.id of the block's first chunk
  pool          INTEGER NOT NULL,             -- pools.handle; 0: the block has no watermarks
  last_chunk    INTEGER NOT NULL,             -- event_chunks.id of its last chunk
  block_rows    INTEGER NOT NULL,             -- how many rows this block has
  t_min         INTEGER NOT NULL,             -- the columns of pool_chunk_summary, merged over
  t_max         INTEGER NOT NULL,             -- the block's chunks (the last values: its last
  reserved_min  INTEGER NOT NULL,             -- chunk's with a row for the pool)
  reserved_max  INTEGER NOT NULL,
  used_min      INTEGER NOT NULL,
  used_max      INTEGER NOT NULL,
  reserved_last INTEGER NOT NULL,
  used_last     INTEGER NOT NULL,
  -- CRC32C of the twelve values above as 64-bit little-endian words
  -- (poolscope::schema::poolBlockChecksum), as 0..2^32-1.
  crc           INTEGER NOT NULL,
  PRIMARY KEY (first_chunk, pool)
) WITHOUT ROWID;

-- Call sites, since version 4 (core/include/poolscope/Stacks.h). An event's site (codec 4) is
-- sites.id; each distinct native stack, Python stack and NVTX range path is stored once.
-- Native frames are module + offset, so that a trace is symbolized wherever the binaries are
-- (found by build_id, or by path when the build-id matches).
CREATE TABLE modules (
  id           INTEGER PRIMARY KEY,           -- 1..; native_frames.module 0 = in no module
  path         TEXT    NOT NULL,
  build_id     TEXT    NOT NULL DEFAULT '',   -- lower-case hex of the NT_GNU_BUILD_ID note
  load_address INTEGER NOT NULL DEFAULT 0,    -- dl_iterate_phdr's dlpi_addr
  size         INTEGER NOT NULL DEFAULT 0     -- span of the loaded segments
);
CREATE TABLE native_frames (
  stack     INTEGER NOT NULL,
  depth     INTEGER NOT NULL,                 -- 0 = innermost (the caller of the CUDA API)
  module    INTEGER NOT NULL,
  pc_offset INTEGER NOT NULL,                 -- return address - load_address (absolute if no module)
  PRIMARY KEY (stack, depth)
) WITHOUT ROWID;
CREATE TABLE python_frames (
  stack    INTEGER NOT NULL,
  depth    INTEGER NOT NULL,                  -- 0 = innermost
  file     TEXT    NOT NULL,
  function TEXT    NOT NULL,
  line     INTEGER NOT NULL,
  PRIMARY KEY (stack, depth)
) WITHOUT ROWID;
CREATE TABLE nvtx_paths (                     -- the push/pop ranges open on the thread
  path  INTEGER NOT NULL,
  depth INTEGER NOT NULL,                     -- 0 = outermost
  name  TEXT    NOT NULL,
  PRIMARY KEY (path, depth)
) WITHOUT ROWID;
CREATE TABLE sites (
  id           INTEGER PRIMARY KEY,           -- Event::site (1..)
  native_stack INTEGER NOT NULL DEFAULT 0,    -- 0 = none recorded
  python_stack INTEGER NOT NULL DEFAULT 0,
  nvtx_path    INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE symbols (                        -- filled at the end of a recording (or later)
  module    INTEGER NOT NULL,
  pc_offset INTEGER NOT NULL,
  function  TEXT    NOT NULL DEFAULT '',
  file      TEXT    NOT NULL DEFAULT '',
  line      INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (module, pc_offset)
) WITHOUT ROWID;
CREATE TABLE nvtx_ranges (                    -- every NVTX range, push/pop and start/end
  id       INTEGER PRIMARY KEY,
  tid      INTEGER NOT NULL,                  -- the thread that opened it
  name     TEXT    NOT NULL,
  start_ns INTEGER NOT NULL,
  end_ns   INTEGER NOT NULL DEFAULT 0,        -- 0 = still open when the recording ended
  depth    INTEGER NOT NULL DEFAULT 0,        -- push/pop nesting on its thread
  kind     INTEGER NOT NULL DEFAULT 1         -- 1 push/pop, 2 start/end
);

CREATE TABLE event_kinds (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
INSERT INTO event_kinds VALUES
  (1,'alloc'),(2,'free'),(3,'pool_create'),(4,'pool_destroy'),(5,'pool_set_attribute'),
  (6,'device_set_mempool'),(7,'pool_trim_to'),(8,'implicit_release'),(9,'event_record'),
  (10,'stream_wait_event'),(11,'stream_synchronize'),(12,'event_synchronize'),
  (13,'context_synchronize'),(14,'pool_export'),(15,'pool_import'),(16,'pointer_export'),
  (17,'pointer_import'),(18,'pool_set_access'),(19,'knob_change'),(20,'stream_create'),
  (21,'stream_destroy'),(22,'sample'),(23,'device_alloc'),(24,'device_free'),(25,'host_alloc'),
  (26,'host_free'),(27,'host_register'),(28,'host_unregister'),(29,'peer_copy');

CREATE TABLE pool_attributes (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
INSERT INTO pool_attributes VALUES
  (1,'reuse_follow_event_dependencies'),(2,'reuse_allow_opportunistic'),
  (3,'reuse_allow_internal_dependencies'),(4,'release_threshold'),(5,'reserved_mem_current'),
  (6,'reserved_mem_high'),(7,'used_mem_current'),(8,'used_mem_high'),
  (1001,'trim_to'),(1002,'reset_high_watermarks');
