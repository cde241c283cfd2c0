# Man pages of the remora command: remora(1) and remora-SUBCOMMAND(1), written by help2man from
# the built command's --help (docs/man/generate.sh), installed in man1. Without help2man there
# are none (a status line says so). REMORA_MAN_GZIP compresses them (gzip -9n), as Debian wants.
option(REMORA_MAN_GZIP "Install the man pages gzip-compressed" OFF)
find_program(REMORA_HELP2MAN help2man)
if(NOT REMORA_HELP2MAN)
  message(STATUS "help2man not found: no man pages (apt-get install help2man)")
  return()
endif()
set(REMORA_MAN_DIR ${PROJECT_BINARY_DIR}/man)
set(REMORA_MAN_PAGES remora remora-info remora-serve remora-put remora-get remora-keygen
                     remora-bench)
set(remora_man_outputs)
foreach(page IN LISTS REMORA_MAN_PAGES)
  list(APPEND remora_man_outputs ${REMORA_MAN_DIR}/${page}.1)
endforeach()
set(remora_man_install ${remora_man_outputs})
set(remora_man_gzip_cmd)
if(REMORA_MAN_GZIP)
  set(remora_man_install)
  foreach(page IN LISTS REMORA_MAN_PAGES)
    list(APPEND remora_man_install ${REMORA_MAN_DIR}/${page}.1.gz)
  endforeach()
  set(remora_man_gzip_cmd COMMAND gzip -9nkf ${remora_man_outputs})
endif()
set(remora_man_all ${remora_man_outputs} ${remora_man_install})
list(REMOVE_DUPLICATES remora_man_all)
add_custom_command(
  OUTPUT ${remora_man_all}
  COMMAND bash ${PROJECT_SOURCE_DIR}/docs/man/generate.sh $<TARGET_FILE:remora_cli>
          ${PROJECT_VERSION} ${REMORA_MAN_DIR}
  ${remora_man_gzip_cmd}
  DEPENDS remora_cli ${PROJECT_SOURCE_DIR}/docs/man/generate.sh ${PROJECT_SOURCE_DIR}/docs/man/remora.h2m
  COMMENT "man pages: ${REMORA_MAN_DIR}" VERBATIM)
add_custom_target(man ALL DEPENDS ${remora_man_all})
install(FILES ${remora_man_install} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
if(REMORA_TESTS)
  # Every page renders without a groff or man warning.
  add_test(NAME man_pages COMMAND bash ${PROJECT_SOURCE_DIR}/tests/docs/man.sh ${remora_man_outputs})
endif()
