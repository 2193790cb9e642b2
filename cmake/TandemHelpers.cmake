# tandem_add_gtest(<name> SOURCES <files...> [LABELS <labels...>] [TIMEOUT <seconds>])
# One GoogleTest executable, registered test by test with CTest.
include(GoogleTest)
function(tandem_add_gtest name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;LABELS;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES} ${PROJECT_SOURCE_DIR}/tests/test_main.cpp)
  target_link_libraries(${name} PRIVATE tandem_core GTest::gtest ${ARG_LIBS})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/core/src ${PROJECT_SOURCE_DIR}/tests)
  target_compile_definitions(${name} PRIVATE
    TANDEM_SOURCE_DIR="${PROJECT_SOURCE_DIR}" TANDEM_BINARY_DIR="${PROJECT_BINARY_DIR}"
    TANDEM_CLI="$<TARGET_FILE:tandem>")
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  gtest_discover_tests(${name} PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT}
                       DISCOVERY_TIMEOUT 60)
endfunction()
