// Build identity, generated at build time (cmake/WriteBuildInfo.cmake).
#ifndef RINGMASTER_CORE_BUILD_INFO_H_
#define RINGMASTER_CORE_BUILD_INFO_H_

namespace ringmaster {

// The git commit the binary was built from ("<sha>[-dirty]" or "unknown").
const char* GitSha();
// The project version from CMakeLists.txt.
const char* RingmasterVersion();

}  // namespace ringmaster

#endif  // RINGMASTER_CORE_BUILD_INFO_H_
