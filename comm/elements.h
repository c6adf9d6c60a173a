// Element access and element-wise reductions on host buffers, for every
// data type the host backend supports (16-bit floats converted by hand:
// GCC 12 has no arithmetic bfloat16 type, and clang 14, which builds the
// ASan+UBSan lane, has no _Float16 on x86).
#ifndef RINGMASTER_COMM_ELEMENTS_H_
#define RINGMASTER_COMM_ELEMENTS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "ringmaster/v1/plan.pb.h"

namespace ringmaster {

float Bf16ToFloat(uint16_t bits);
uint16_t FloatToBf16(float f);  // round to nearest even
// IEEE 754 binary16, written by hand; equal bit for bit to GCC's _Float16
// conversions (elements_test.cc checks every half and millions of floats).
float HalfToFloat(uint16_t bits);
uint16_t FloatToHalf(float f);  // round to nearest even

// Element `i` of a `t` buffer, as double (and back).
double LoadElement(v1::DataType t, const unsigned char* base, int64_t i);
void StoreElement(v1::DataType t, unsigned char* base, int64_t i, double v);

// inout[i] = op(in[i], inout[i]) for `count` elements. SUM, PROD, MIN and
// MAX (AVG is a SUM the caller divides); InvalidArgument otherwise.
absl::Status ReduceInto(v1::DataType t, v1::ReduceOp op, const void* in,
                        void* inout, int64_t count);

}  // namespace ringmaster

#endif  // RINGMASTER_COMM_ELEMENTS_H_
