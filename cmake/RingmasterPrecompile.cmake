# Precompiled headers for the targets with many sources: the standard
# library, Abseil and the generated plan/result messages (each of the
# latter some 8,000 lines of protobuf accessors) that most sources include.
# A build's compile time is mostly these headers, parsed once per source
# otherwise. RINGMASTER_PCH=OFF turns them off (ccache then caches every
# object; with them, scripts/build sets the ccache sloppiness PCH needs).
option(RINGMASTER_PCH "Precompile the common headers of the larger targets" ON)

# ringmaster_precompile(TARGET [HEADER...]): the common headers, and more
# (<gtest/gtest.h> for a test target).
function(ringmaster_precompile target)
  if(NOT RINGMASTER_PCH)
    return()
  endif()
  target_precompile_headers(${target} PRIVATE ${ARGN}
    <algorithm> <cmath> <cstdint> <functional> <map> <memory> <optional>
    <set> <string> <string_view> <utility> <vector>
    <absl/status/status.h> <absl/status/statusor.h>
    <absl/strings/str_format.h> <absl/strings/str_join.h>
    <ringmaster/v1/plan.pb.h> <ringmaster/v1/result.pb.h>)
endfunction()
