# Man pages generated at build time from the programs' own --help (help2man), so they never
# drift from the CLI. poolscope_man_page(PAGE TARGET DESCRIPTION [VERB verb] [ENV var=value...])
# writes PAGE.1.gz (gzip -9n, as Debian wants) and installs it. A verb's page runs `TARGET verb`
# through a one-line wrapper named PAGE, because help2man names the page after the executable.
find_program(POOLSCOPE_HELP2MAN help2man)
if(NOT POOLSCOPE_HELP2MAN)
  message(WARNING "PoolScope: help2man not found: no man pages (apt-get install help2man)")
endif()

function(poolscope_man_page page target description)
  if(NOT POOLSCOPE_HELP2MAN)
    return()
  endif()
  cmake_parse_arguments(PARSE_ARGV 3 MAN "" "VERB" "ENV")
  set(dir ${CMAKE_BINARY_DIR}/man)
  set(wrapper ${dir}/wrappers/${page})
  file(GENERATE OUTPUT ${wrapper}
       CONTENT "#!/bin/sh\nexec env ${MAN_ENV} \"$<TARGET_FILE:${target}>\" ${MAN_VERB} \"$@\"\n"
       FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                        WORLD_READ WORLD_EXECUTE)
  add_custom_command(OUTPUT ${dir}/${page}.1.gz
    COMMAND ${POOLSCOPE_HELP2MAN} --no-info --no-discard-stderr
            --version-string=${PROJECT_VERSION} --name=${description}
            --output=${dir}/${page}.1 ${wrapper}
    COMMAND gzip -9 -n -f ${dir}/${page}.1
    DEPENDS ${target} VERBATIM)
  add_custom_target(man_${page} ALL DEPENDS ${dir}/${page}.1.gz)
  install(FILES ${dir}/${page}.1.gz DESTINATION share/man/man1)
endfunction()
