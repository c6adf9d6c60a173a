// Early-return helpers for absl::Status / absl::StatusOr.
//
// Hand-written: Abseil 20220623 (Debian 12) does not ship public versions
// of these macros.
#ifndef RINGMASTER_CORE_STATUS_MACROS_H_
#define RINGMASTER_CORE_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define RM_CONCAT_INNER_(a, b) a##b
#define RM_CONCAT_(a, b) RM_CONCAT_INNER_(a, b)

// Returns the status from the enclosing function if `expr` is not OK.
#define RM_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::absl::Status rm_status_ = (expr);      \
    if (!rm_status_.ok()) return rm_status_; \
  } while (0)

// `lhs = value of expr`, or returns its error status.
#define RM_ASSIGN_OR_RETURN(lhs, expr) \
  RM_ASSIGN_OR_RETURN_IMPL_(RM_CONCAT_(rm_statusor_, __LINE__), lhs, expr)
#define RM_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()

#endif  // RINGMASTER_CORE_STATUS_MACROS_H_
