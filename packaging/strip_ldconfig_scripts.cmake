# CPACK_POST_BUILD_SCRIPTS hook: removes the postinst/postrm that CPack (3.25) writes into every
# Debian package holding a library under /usr/lib, whose only content is a call to ldconfig.
# The packages declare "activate-noawait ldconfig" in their triggers file instead, as Debian has
# done since dpkg 1.17 (lintian: maintscript-calls-ldconfig), and without maintainer scripts a
# package also installs into a bare root (dpkg --root, no /bin/sh there).
foreach(file IN LISTS CPACK_PACKAGE_FILES)
  if(NOT file MATCHES "\\.deb$")
    continue()
  endif()
  set(tree "${file}.tree")
  file(REMOVE_RECURSE "${tree}")
  execute_process(COMMAND dpkg-deb --raw-extract "${file}" "${tree}" COMMAND_ERROR_IS_FATAL ANY)
  set(changed FALSE)
  foreach(script postinst postrm)
    if(EXISTS "${tree}/DEBIAN/${script}")
      file(READ "${tree}/DEBIAN/${script}" text)
      string(REGEX REPLACE "#!/bin/sh|set -e|if \\[ \"\\$1\" = \"(configure|remove)\" \\]; then|ldconfig|fi|[ \t\r\n]"
             "" rest "${text}")
      if(NOT rest STREQUAL "")
        message(FATAL_ERROR "${file}: ${script} does more than call ldconfig:\n${text}")
      endif()
      file(REMOVE "${tree}/DEBIAN/${script}")
      set(changed TRUE)
    endif()
  endforeach()
  if(changed)
    execute_process(COMMAND dpkg-deb --root-owner-group -Zxz --build "${tree}" "${file}"
                    OUTPUT_QUIET COMMAND_ERROR_IS_FATAL ANY)
  endif()
  file(REMOVE_RECURSE "${tree}")
endforeach()
