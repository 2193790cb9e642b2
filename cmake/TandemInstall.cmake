# Install rules and the CMake package of the plugin SDK (find_package(Tandem 0.1 REQUIRED)).
# Included once, at the end of the top-level CMakeLists.txt (every target exists by then).
#
#   <prefix>/bin/tandem                                 RUNPATH $ORIGIN/../lib
#   <prefix>/lib/libtandem.so*
#   <prefix>/lib/tandem/plugins/tandem-<name>.so        the built-in plugins, RUNPATH $ORIGIN/../..
#                                                       (PluginHost finds this folder from
#                                                       libtandem's own location: relocatable)
#   <prefix>/lib/tandem/modules/libtandem-cuda.so       the CUDA module (with CUDA; component
#                                                       "cuda"), RUNPATH $ORIGIN/../..
#   <prefix>/include/tandem/*.hpp                       the public headers = the plugin SDK
#   <prefix>/share/tandem/configs/*.json                example run configs (`tandem train`'s
#                                                       default config is found here)
#   <prefix>/bin/tandem-gui, share/applications/tandem-gui.desktop,
#   share/icons/hicolor/{scalable,48x48,256x256}/apps/tandem.{svg,png}   (with the GUI)
#   <prefix>/share/man/man1/tandem.1.gz, tandem-gui.1.gz
#   <prefix>/lib/cmake/Tandem/                          TandemConfig.cmake, TandemConfigVersion.cmake,
#                                                       TandemTargets*.cmake (target Tandem::core)
#
# ("lib" is CMAKE_INSTALL_LIBDIR: lib/<multiarch> when configured for the prefix /usr on Debian.)
# Components: "runtime" (binaries, library, plugins, configs), "cuda" (the CUDA module, which
# needs NVIDIA's libraries) and "sdk" (headers, CMake package).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(TANDEM_INSTALL_PLUGINDIR ${CMAKE_INSTALL_LIBDIR}/tandem/plugins)
set(TANDEM_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/Tandem)
file(RELATIVE_PATH tandem_bin_to_lib /prefix/${CMAKE_INSTALL_BINDIR} /prefix/${CMAKE_INSTALL_LIBDIR})

# The library and the binary. Consumers of Tandem::core get its headers, its PUBLIC deps
# (nlohmann_json, Threads, Boost headers), BOOST_DLL_USE_STD_FS and C++20.
set_target_properties(tandem_core PROPERTIES EXPORT_NAME core)
target_compile_features(tandem_core INTERFACE cxx_std_20)
install(TARGETS tandem_core EXPORT TandemTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT sdk)
set_target_properties(tandem PROPERTIES INSTALL_RPATH "$ORIGIN/${tandem_bin_to_lib}")
install(TARGETS tandem RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
if(TARGET tandem_cuda)
  set_target_properties(tandem_cuda PROPERTIES INSTALL_RPATH "$ORIGIN/../..")
  install(TARGETS tandem_cuda LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/tandem/modules
    COMPONENT cuda)
endif()
if(TARGET tandem-gui)
  set_target_properties(tandem-gui PROPERTIES INSTALL_RPATH "$ORIGIN/${tandem_bin_to_lib}")
  install(TARGETS tandem-gui RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
  # Where desktops look: the .desktop entry and the icon theme (hicolor).
  install(FILES ${PROJECT_SOURCE_DIR}/resources/tandem-gui.desktop
    DESTINATION ${CMAKE_INSTALL_DATADIR}/applications COMPONENT runtime)
  install(FILES ${PROJECT_SOURCE_DIR}/resources/icons/tandem.svg
    DESTINATION ${CMAKE_INSTALL_DATADIR}/icons/hicolor/scalable/apps COMPONENT runtime)
  foreach(size 48 256)
    install(FILES ${PROJECT_SOURCE_DIR}/resources/icons/tandem-${size}.png
      DESTINATION ${CMAKE_INSTALL_DATADIR}/icons/hicolor/${size}x${size}/apps
      RENAME tandem.png COMPONENT runtime)
  endforeach()
endif()

# The built-in plugins: every tandem_add_plugin() target built into the build tree's plugins/
# folder (the example and the test plugins are built elsewhere and are not installed).
get_property(tandem_all_plugins GLOBAL PROPERTY TANDEM_PLUGIN_TARGETS)
set(tandem_builtin_plugins)
foreach(target IN LISTS tandem_all_plugins)
  get_target_property(dir ${target} LIBRARY_OUTPUT_DIRECTORY)
  if(dir STREQUAL "${PROJECT_BINARY_DIR}/plugins")
    list(APPEND tandem_builtin_plugins ${target})
  endif()
endforeach()
if(tandem_builtin_plugins)
  set_target_properties(${tandem_builtin_plugins} PROPERTIES INSTALL_RPATH "$ORIGIN/../..")
  install(TARGETS ${tandem_builtin_plugins}
    LIBRARY DESTINATION ${TANDEM_INSTALL_PLUGINDIR} COMPONENT runtime)
endif()

# Manual pages, compressed the way Debian ships them (gzip -9n: the same bytes on every build).
set(tandem_man_pages tandem)
if(TARGET tandem-gui)
  list(APPEND tandem_man_pages tandem-gui)
endif()
set(tandem_man_outputs)
foreach(page IN LISTS tandem_man_pages)
  set(gz ${PROJECT_BINARY_DIR}/packaging/man/${page}.1.gz)
  add_custom_command(OUTPUT ${gz}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/packaging/man
    COMMAND gzip -9n -c ${PROJECT_SOURCE_DIR}/packaging/man/${page}.1 > ${gz}
    DEPENDS ${PROJECT_SOURCE_DIR}/packaging/man/${page}.1 VERBATIM)
  list(APPEND tandem_man_outputs ${gz})
endforeach()
add_custom_target(tandem_man_pages ALL DEPENDS ${tandem_man_outputs})
install(FILES ${tandem_man_outputs} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT runtime)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/core/include/tandem
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT sdk FILES_MATCHING PATTERN "*.hpp")
install(DIRECTORY ${PROJECT_SOURCE_DIR}/resources/configs/
  DESTINATION ${CMAKE_INSTALL_DATADIR}/tandem/configs COMPONENT runtime
  FILES_MATCHING PATTERN "*.json")

# The CMake package.
file(STRINGS ${PROJECT_SOURCE_DIR}/core/include/tandem/plugin.hpp tandem_abi_line
     REGEX "^#define TANDEM_PLUGIN_ABI_VERSION [0-9]+")
string(REGEX REPLACE ".* ([0-9]+)$" "\\1" TANDEM_PLUGIN_ABI_VERSION "${tandem_abi_line}")
install(EXPORT TandemTargets NAMESPACE Tandem:: DESTINATION ${TANDEM_INSTALL_CMAKEDIR}
  COMPONENT sdk)
configure_package_config_file(${PROJECT_SOURCE_DIR}/packaging/TandemConfig.cmake.in
  ${PROJECT_BINARY_DIR}/packaging/TandemConfig.cmake
  INSTALL_DESTINATION ${TANDEM_INSTALL_CMAKEDIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR TANDEM_INSTALL_PLUGINDIR)
# 0.x: a new minor version may break the SDK, so 0.1 accepts 0.1.* only.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/packaging/TandemConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/packaging/TandemConfig.cmake
              ${PROJECT_BINARY_DIR}/packaging/TandemConfigVersion.cmake
  DESTINATION ${TANDEM_INSTALL_CMAKEDIR} COMPONENT sdk)
