# SPDX-License-Identifier: BSD-3-Clause
# Man pages of the remora command: remora(1) and remora-SUBCOMMAND(1), written by help2man from
# the built command's --help (docs/man/generate.sh), installed gzip-compressed (as Debian wants;
# man reads them either way) in man1, component `tools`. Without help2man there are none (a
# status line says so).
find_program(REMORA_HELP2MAN help2man)
if(NOT REMORA_HELP2MAN)
  message(STATUS "help2man not found: no man pages (apt-get install help2man)")
  return()
endif()
set(REMORA_MAN_DIR ${PROJECT_BINARY_DIR}/man)
set(REMORA_MAN_PAGES remora remora-info remora-serve remora-put remora-get remora-keygen
                     remora-bench)
set(remora_man_pages)
set(remora_man_gz)
foreach(page IN LISTS REMORA_MAN_PAGES)
  list(APPEND remora_man_pages ${REMORA_MAN_DIR}/${page}.1)
  list(APPEND remora_man_gz ${REMORA_MAN_DIR}/${page}.1.gz)
endforeach()
add_custom_command(
  OUTPUT ${remora_man_pages} ${remora_man_gz}
  COMMAND bash ${PROJECT_SOURCE_DIR}/docs/man/generate.sh $<TARGET_FILE:remora_cli>
          ${PROJECT_VERSION} ${REMORA_MAN_DIR}
  COMMAND gzip -9nkf ${remora_man_pages}
  DEPENDS remora_cli ${PROJECT_SOURCE_DIR}/docs/man/generate.sh
          ${PROJECT_SOURCE_DIR}/docs/man/remora.h2m
  COMMENT "man pages: ${REMORA_MAN_DIR}" VERBATIM)
add_custom_target(man ALL DEPENDS ${remora_man_pages} ${remora_man_gz})
install(FILES ${remora_man_gz} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT tools)
if(REMORA_TESTS)
  # Every page renders without a groff or man warning.
  add_test(NAME man_pages COMMAND bash ${PROJECT_SOURCE_DIR}/tests/docs/man.sh ${remora_man_pages})
endif()
