# CPack: Debian packages and a relocatable .tar.gz (scripts/package runs it; docs in README.md).
# Included at the end of the top-level CMakeLists.txt, after TandemInstall.cmake.
#
#   tandem_<v>_<arch>.deb        component "runtime": tandem, tandem-gui, libtandem, the built-in
#                                plugins, example configs, the desktop entry and icons. Its
#                                Depends come from dpkg-shlibdeps (Debian package names), so
#                                `apt install ./tandem_<v>_<arch>.deb` pulls them in.
#   tandem-dev_<v>_<arch>.deb    component "sdk": headers and the CMake package for plugins.
#   tandem-cuda_<v>_<arch>.deb   component "cuda" (only when the CUDA module is built): the module
#                                that needs NVIDIA's libraries (driver, NCCL), which are not Debian
#                                packages - so it is a package of its own that tandem only
#                                suggests, and its Depends name Debian packages only.
#   Tandem-<v>-Linux-<arch>.tar.gz   every component in one relocatable tree.

# /usr/share/doc/<package>/{copyright,changelog.gz} of each Debian package (Debian policy 12.5,
# 12.7), also in the .tar.gz. gzip -n: the same bytes on every build.
set(tandem_changelog_gz ${PROJECT_BINARY_DIR}/packaging/changelog.gz)
add_custom_command(OUTPUT ${tandem_changelog_gz}
  COMMAND gzip -9n -c ${PROJECT_SOURCE_DIR}/packaging/debian/changelog > ${tandem_changelog_gz}
  DEPENDS ${PROJECT_SOURCE_DIR}/packaging/debian/changelog VERBATIM)
add_custom_target(tandem_changelog ALL DEPENDS ${tandem_changelog_gz})
set(tandem_package_components runtime sdk)
if(TARGET tandem_cuda)
  list(APPEND tandem_package_components cuda)
endif()
foreach(component IN LISTS tandem_package_components)
  set(package tandem)
  if(component STREQUAL "sdk")
    set(package tandem-dev)
  elseif(component STREQUAL "cuda")
    set(package tandem-cuda)
  endif()
  install(FILES ${PROJECT_SOURCE_DIR}/packaging/debian/copyright ${tandem_changelog_gz}
    DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${package} COMPONENT ${component})
endforeach()
# The Apache-2.0 text itself, for the .tar.gz and `cmake --install` trees, which may land where
# the copyright file's /usr/share/common-licenses/Apache-2.0 does not exist. Its component is not
# in CPACK_COMPONENTS_ALL, so no .deb ships it (Debian policy 12.5; lintian: extra-license-file),
# while the monolithic .tar.gz takes every component.
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/tandem
  COMPONENT license)

set(CPACK_PACKAGE_NAME tandem)
set(CPACK_PACKAGE_VENDOR "The Tandem developers")
set(CPACK_PACKAGE_CONTACT "Tandem developers <developers@tandem-ml.org>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
# Empty: each Debian package's synopsis is the first line of its component's description (CPack
# would otherwise put one summary in front of all three).
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "")
set(CPACK_PACKAGE_HOMEPAGE_URL "https://tandem-ml.org")
set(CPACK_GENERATOR DEB TGZ)
set(CPACK_STRIP_FILES TRUE)
set(CPACK_COMPONENTS_ALL ${tandem_package_components})
set(CPACK_ARCHIVE_COMPONENT_INSTALL OFF)  # one .tar.gz with everything
set(CPACK_PACKAGE_FILE_NAME "Tandem-${PROJECT_VERSION}-Linux-${CMAKE_SYSTEM_PROCESSOR}")

set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # <package>_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_RELEASE "")
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)
set(CPACK_DEBIAN_COMPRESSION_TYPE xz)

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME tandem)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION science)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SHLIBDEPS ON)
# libtandem.so.0 is found inside the package being built.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CMAKE_INSTALL_LIBDIR})
# A shlibs file for libtandem.so.0 and an ldconfig trigger (Debian policy 8.6, 8.1.1). Written
# here rather than by CPack's GENERATE_SHLIBS, which warns about every plugin (modules have no
# soname). 0.x: a package built against libtandem 0.1 needs 0.1.*, as find_package(Tandem 0.1).
math(EXPR tandem_next_minor "${PROJECT_VERSION_MINOR} + 1")
configure_file(${PROJECT_SOURCE_DIR}/packaging/debian/shlibs.in ${PROJECT_BINARY_DIR}/packaging/shlibs
               @ONLY)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA ${PROJECT_SOURCE_DIR}/packaging/debian/triggers
    ${PROJECT_BINARY_DIR}/packaging/shlibs)
# ... and no maintainer scripts (CPack would add ldconfig calls; see the script).
set(CPACK_POST_BUILD_SCRIPTS ${PROJECT_SOURCE_DIR}/packaging/strip_ldconfig_scripts.cmake)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_RECOMMENDS "openmpi-bin")
if(TARGET tandem-gui)
  # Loaded as a Qt plugin, not linked: tandem-gui's SVG icon.
  set(CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS "libqt6svg6 (>= 6.4)")
endif()
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SUGGESTS "tandem-dev, tandem-cuda")
set(CPACK_COMPONENT_RUNTIME_DESCRIPTION
"data-parallel deep-learning training engine and dashboard
Tandem trains one model on many devices at once: a meta-model of replicas
around a single-device template model, with checkpoints that load on any
device layout. This package has the tandem command (train, evaluate,
predict, check, devices, plugins, inspect), the built-in callback plugins
(checkpoint, early stopping, logging, ...), example run configurations and
tandem-gui, the desktop dashboard for GPUs, live metrics and checkpoints.

Multi-process runs use mpirun from openmpi-bin; GPUs need tandem-cuda.")

set(CPACK_DEBIAN_SDK_PACKAGE_NAME tandem-dev)
set(CPACK_DEBIAN_SDK_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_SDK_PACKAGE_DEPENDS
    "tandem (= ${PROJECT_VERSION}), nlohmann-json3-dev (>= 3), libboost-dev (>= 1.74)")
set(CPACK_DEBIAN_SDK_PACKAGE_RECOMMENDS "cmake (>= 3.25), g++ (>= 4:12)")
set(CPACK_COMPONENT_SDK_DESCRIPTION
"plugin SDK of the Tandem training engine
Headers and the CMake package (find_package(Tandem 0.1 REQUIRED), target
Tandem::core, function tandem_add_plugin) for building callback plugins
that the tandem engine loads at run time.")

set(CPACK_DEBIAN_CUDA_PACKAGE_NAME tandem-cuda)
set(CPACK_DEBIAN_CUDA_PACKAGE_SECTION science)
# NVIDIA's libraries come from NVIDIA, not from Debian: only Debian packages are named here.
set(CPACK_DEBIAN_CUDA_PACKAGE_SHLIBDEPS OFF)
set(CPACK_DEBIAN_CUDA_PACKAGE_DEPENDS
    "tandem (= ${PROJECT_VERSION}), libc6 (>= 2.34), libstdc++6 (>= 12), libgcc-s1 (>= 3.0)")
set(CPACK_COMPONENT_CUDA_DESCRIPTION
"CUDA GPU support for the Tandem training engine
The module the tandem engine loads for CUDA device plans such as cuda:0 or
cuda:all: GPU discovery, cuBLASLt kernels and NCCL all-reduce across GPUs
and processes.

It needs the NVIDIA driver (libcuda.so.1) and the CUDA 13 libraries
libcublasLt.so.13 and libnccl.so.2 (from NVIDIA's toolkit), which are not
Debian packages; without them `tandem devices` says which library is
missing and CPU training is unaffected.")

include(CPack)
