include(GoogleTest)

# tandem_test_code_options(<target>): the optimisation test code compiles with (every GoogleTest
# executable, the GPU tests' included).
function(tandem_test_code_options target)
  # Test code checks the engine; it is not what is timed, and the engine it calls keeps its own
  # optimisation, so it compiles at -O0. With GCC -O1 compiled it about a third faster than the
  # build type's -O3, and -O0 a unity batch of unit tests faster again, 12.5 s against 16.0;
  # under the sanitizers (clang) -O0 compiles it three times faster than -O1 (the unit tests
  # then run about a third longer, far less than the compile saves).
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-O0>)
endfunction()

# The settings every GoogleTest target compiles with (the test executables and their shared
# precompiled header).
function(tandem_gtest_settings target)
  target_link_libraries(${target} PRIVATE tandem_core GTest::gtest)
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/core/src ${PROJECT_SOURCE_DIR}/tests)
  target_compile_definitions(${target} PRIVATE
    TANDEM_SOURCE_DIR="${PROJECT_SOURCE_DIR}" TANDEM_BINARY_DIR="${PROJECT_BINARY_DIR}"
    TANDEM_CLI="$<TARGET_FILE:tandem>")
  tandem_test_code_options(${target})
endfunction()

# tandem_add_gtest(<name> SOURCES <files...> [LABELS <labels...>] [TIMEOUT <seconds>])
# One GoogleTest executable, registered test by test with CTest.
function(tandem_add_gtest name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;LABELS;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES} ${PROJECT_SOURCE_DIR}/tests/test_main.cpp)
  tandem_gtest_settings(${name})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS})
  # The headers every test file includes are compiled once for all the test executables (6-10 s
  # each when every executable compiled its own).
  if(NOT TARGET tandem_gtest_pch)
    set(source ${PROJECT_BINARY_DIR}/tandem_gtest_pch.cpp)
    file(GENERATE OUTPUT ${source}
         CONTENT "// Compiled only to build the GoogleTest executables' precompiled header.\n")
    add_library(tandem_gtest_pch OBJECT ${source})
    tandem_gtest_settings(tandem_gtest_pch)
    # Compiled as the executables are (-fPIE, not a library's -fPIC): GCC refuses a precompiled
    # header made with other code-generation settings.
    set_target_properties(tandem_gtest_pch PROPERTIES POSITION_INDEPENDENT_CODE OFF)
    target_compile_options(tandem_gtest_pch PRIVATE -fPIE)
    target_precompile_headers(tandem_gtest_pch PRIVATE <gtest/gtest.h> <nlohmann/json.hpp>
                              <filesystem> <string> <vector>)
  endif()
  target_precompile_headers(${name} REUSE_FROM tandem_gtest_pch)
  # Unity builds (TANDEM_UNITY_BUILD, as the engine's) batch 16 test files into one compilation.
  # A test file's helpers live in `namespace TANDEM_TEST_FILE { ... }`: anonymous in a plain
  # build, a namespace of the file's own in a unity batch (CMake's UNITY_BUILD_UNIQUE_ID), so
  # two files' helpers of the same name never meet.
  if(TANDEM_UNITY_BUILD)
    set_target_properties(${name} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 16
                          UNITY_BUILD_UNIQUE_ID TANDEM_TEST_FILE)
  else()
    target_compile_definitions(${name} PRIVATE TANDEM_TEST_FILE=)
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  gtest_discover_tests(${name} PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT}
                       DISCOVERY_TIMEOUT 60)
endfunction()

# tandem_reuse_plugin_pch(<target>)
# <target> (a plugin module of this build) compiles with one precompiled tandem/plugin.hpp: its
# nlohmann/json and Boost.DLL take about 2 of the 3 s a small plugin file compiles in, paid once
# here instead of in each of the build's 25 plugin files. Plugins built out of tree against an
# installed Tandem (TandemConfig.cmake's tandem_add_plugin) include it as written.
function(tandem_reuse_plugin_pch target)
  if(NOT TARGET tandem_plugin_pch)
    set(source ${PROJECT_BINARY_DIR}/tandem_plugin_pch.cpp)
    file(GENERATE OUTPUT ${source}
         CONTENT "// Compiled only to build the plugins' precompiled header.\n")
    add_library(tandem_plugin_pch OBJECT ${source})
    target_link_libraries(tandem_plugin_pch PRIVATE tandem_core)
    target_precompile_headers(tandem_plugin_pch PRIVATE <string> <stdexcept>
                              <tandem/error.hpp> <tandem/plugin.hpp>)
  endif()
  target_precompile_headers(${target} REUSE_FROM tandem_plugin_pch)
endfunction()

# tandem_add_plugin(<name> SOURCES <files...>)
# A callback plugin: a shared module "tandem-<name>.so" in the build tree's plugins/ folder,
# where the host finds it without any environment variable.
function(tandem_add_plugin name)
  cmake_parse_arguments(ARG "" "" "SOURCES" ${ARGN})
  set(target tandem_plugin_${name})
  add_library(${target} MODULE ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE tandem_core)
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/plugins)
  target_link_options(${target} PRIVATE ${TANDEM_MODULE_LINK_CHECK})
  tandem_reuse_plugin_pch(${target})
  set_target_properties(${target} PROPERTIES PREFIX "" OUTPUT_NAME "tandem-${name}"
                        LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/plugins)
  set_property(GLOBAL APPEND PROPERTY TANDEM_PLUGIN_TARGETS ${target})
endfunction()
