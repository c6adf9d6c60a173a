# Generates build_info.cc at build time so the git sha stays current
# without re-running CMake. The file is rewritten only when it changes.
set(RINGMASTER_BUILD_INFO_CC ${CMAKE_BINARY_DIR}/generated/build_info.cc)
add_custom_target(ringmaster_build_info_gen
  COMMAND ${CMAKE_COMMAND}
    -DSOURCE_DIR=${CMAKE_SOURCE_DIR}
    -DOUTPUT=${RINGMASTER_BUILD_INFO_CC}
    -DVERSION=${PROJECT_VERSION}
    -P ${CMAKE_SOURCE_DIR}/cmake/WriteBuildInfo.cmake
  BYPRODUCTS ${RINGMASTER_BUILD_INFO_CC}
  COMMENT "Recording git sha")
