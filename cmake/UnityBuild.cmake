# Unity builds (-DCMAKE_UNITY_BUILD=ON): what scripts/quickstart.sh uses, so that a fresh 2-core machine reaches the
# first report in minutes (docs/quickstart-timing.md). Parsing the same headers again in every file is most of a
# compile here (a rule file spends 1.5 of its 1.5 s in the front end), so compiling files in batches of 8 halves
# the build's CPU time. A batch is one translation unit: file-local names (anonymous namespaces) of its files must
# not clash. The files below have names of their own that a neighbour also defines, so they are compiled alone.
# The tests' build (scripts/test.sh) is not a unity build, and the quick start falls back to a normal build when a
# new clash breaks this one; a clash found so is added here.
if(NOT CMAKE_UNITY_BUILD)
  return()
endif()
set_source_files_properties(${PROJECT_SOURCE_DIR}/lib/import/chrome_trace.cpp TARGET_DIRECTORY inferscope_import
                            PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)  # HostEvent, as json_events.cpp's
set_source_files_properties(${PROJECT_SOURCE_DIR}/lib/analyze/run/host_clocks.cpp TARGET_DIRECTORY inferscope_analyze
                            PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)  # median_of, as what_if.cpp's
set_source_files_properties(${PROJECT_SOURCE_DIR}/lib/report/html.cpp TARGET_DIRECTORY inferscope_report
                            PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)  # write_findings ..., as markdown.cpp's
set_source_files_properties(${PROJECT_SOURCE_DIR}/lib/report/diff_json.cpp TARGET_DIRECTORY inferscope_report
                            PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)  # str and num, as json.cpp's
