# CTest registers each doctest case under its name (doctest_discover_tests); a name holding ';' becomes
# two CTest entries whose filters match no case, so that case silently never runs under CTest. This
# check fails on any such name.
#   cmake -DTEST_DIR=<tests folder> -P check_test_names.cmake
file(GLOB_RECURSE sources "${TEST_DIR}/*.cpp")
set(bad "")
foreach(source ${sources})
  file(STRINGS "${source}" lines REGEX "TEST_CASE\\(\"")
  foreach(line ${lines})
    if(line MATCHES "TEST_CASE\\(\"[^\"]*;")
      string(STRIP "${line}" line)
      string(APPEND bad "\n  ${source}: ${line}")
    endif()
  endforeach()
endforeach()
if(bad)
  message(FATAL_ERROR "test names CTest cannot run (no ';' in a TEST_CASE name):${bad}")
endif()
