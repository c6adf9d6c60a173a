#include "comm/elements.h"

#include <bit>
#include <cmath>
#include <cstring>

#include "absl/strings/str_format.h"
#include "core/names.h"

namespace ringmaster {
namespace {

template <typename T>
T Combine(v1::ReduceOp op, T x, T y) {
  switch (op) {
    case v1::PROD:
      return static_cast<T>(x * y);
    case v1::MIN:
      return x < y ? x : y;
    case v1::MAX:
      return x > y ? x : y;
    default:  // SUM
      return static_cast<T>(x + y);
  }
}

template <typename T>
void ReduceTyped(v1::ReduceOp op, const void* in, void* inout, int64_t count) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  // One loop per op so the common case (sum) vectorizes.
  switch (op) {
    case v1::SUM:
      for (int64_t i = 0; i < count; ++i) b[i] = static_cast<T>(a[i] + b[i]);
      return;
    default:
      for (int64_t i = 0; i < count; ++i) b[i] = Combine<T>(op, a[i], b[i]);
  }
}

// 16-bit floats: widen, combine, round back (through float, as stores do).
void ReduceWidened(v1::DataType t, v1::ReduceOp op, const void* in, void* inout,
                   int64_t count) {
  const auto* a = static_cast<const unsigned char*>(in);
  auto* b = static_cast<unsigned char*>(inout);
  for (int64_t i = 0; i < count; ++i) {
    StoreElement(
        t, b, i,
        Combine<double>(op, LoadElement(t, a, i), LoadElement(t, b, i)));
  }
}

}  // namespace

float Bf16ToFloat(uint16_t bits) {
  uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

uint16_t FloatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);                   // round to nearest even
  return static_cast<uint16_t>(u >> 16);
}

float HalfToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu, mantissa = bits & 0x3ffu;
  if (exponent == 0) {  // zero or subnormal: mantissa x 2^-24, exact
    const float v = static_cast<float>(mantissa) * 0x1p-24f;
    return sign ? -v : v;
  }
  uint32_t u = sign | (mantissa << 13);
  u |= exponent == 31 ? 0x7f800000u              // infinity, NaN
                      : (exponent + 112) << 23;  // rebias 15 -> 127
  return std::bit_cast<float>(u);
}

uint16_t FloatToHalf(float f) {
  const auto u = std::bit_cast<uint32_t>(f);
  const auto sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t magnitude = u & 0x7fffffffu;
  if (magnitude > 0x7f800000u)  // NaN: quiet, the payload's top bits kept
    return sign | 0x7e00u | static_cast<uint16_t>((magnitude >> 13) & 0x3ffu);
  // 65520 (halfway from the largest half, 65504, to 65536) and above round
  // to infinity.
  if (magnitude >= 0x477ff000u) return sign | 0x7c00u;
  if (magnitude >= 0x38800000u) {  // a normal half (2^-14 and above)
    const uint32_t rounded =
        magnitude + 0xfffu + ((magnitude >> 13) & 1u);  // to nearest even
    return sign | static_cast<uint16_t>((rounded - 0x38000000u) >> 13);
  }
  // Subnormal or zero: in units of 2^-24 (the scaling is exact), rounded to
  // nearest even by the default rounding mode; 1024 units is the smallest
  // normal half, whose bits are the same number.
  const auto v = std::bit_cast<float>(magnitude);
  return sign | static_cast<uint16_t>(std::nearbyint(v * 0x1p24f));
}

double LoadElement(v1::DataType t, const unsigned char* base, int64_t i) {
  switch (t) {
    case v1::FLOAT32:
      return reinterpret_cast<const float*>(base)[i];
    case v1::FLOAT64:
      return reinterpret_cast<const double*>(base)[i];
    case v1::INT32:
      return reinterpret_cast<const int32_t*>(base)[i];
    case v1::INT64:
      return static_cast<double>(reinterpret_cast<const int64_t*>(base)[i]);
    case v1::INT8:
      return reinterpret_cast<const int8_t*>(base)[i];
    case v1::UINT8:
      return reinterpret_cast<const uint8_t*>(base)[i];
    case v1::BFLOAT16:
      return Bf16ToFloat(reinterpret_cast<const uint16_t*>(base)[i]);
    case v1::FLOAT16:
      return HalfToFloat(reinterpret_cast<const uint16_t*>(base)[i]);
    default:
      return 0;
  }
}

void StoreElement(v1::DataType t, unsigned char* base, int64_t i, double v) {
  switch (t) {
    case v1::FLOAT32:
      reinterpret_cast<float*>(base)[i] = static_cast<float>(v);
      break;
    case v1::FLOAT64:
      reinterpret_cast<double*>(base)[i] = v;
      break;
    case v1::INT32:
      reinterpret_cast<int32_t*>(base)[i] = static_cast<int32_t>(v);
      break;
    case v1::INT64:
      reinterpret_cast<int64_t*>(base)[i] = static_cast<int64_t>(v);
      break;
    case v1::INT8:
      reinterpret_cast<int8_t*>(base)[i] = static_cast<int8_t>(v);
      break;
    case v1::UINT8:
      reinterpret_cast<uint8_t*>(base)[i] = static_cast<uint8_t>(v);
      break;
    case v1::BFLOAT16:
      reinterpret_cast<uint16_t*>(base)[i] = FloatToBf16(static_cast<float>(v));
      break;
    case v1::FLOAT16:
      reinterpret_cast<uint16_t*>(base)[i] = FloatToHalf(static_cast<float>(v));
      break;
    default:
      break;
  }
}

absl::Status ReduceInto(v1::DataType t, v1::ReduceOp op, const void* in,
                        void* inout, int64_t count) {
  if (op != v1::SUM && op != v1::PROD && op != v1::MIN && op != v1::MAX) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "reduction op %s is not supported on host buffers", ReduceOpName(op)));
  }
  switch (t) {
    case v1::FLOAT32:
      ReduceTyped<float>(op, in, inout, count);
      break;
    case v1::FLOAT64:
      ReduceTyped<double>(op, in, inout, count);
      break;
    case v1::INT32:
      ReduceTyped<int32_t>(op, in, inout, count);
      break;
    case v1::INT64:
      ReduceTyped<int64_t>(op, in, inout, count);
      break;
    case v1::INT8:
      ReduceTyped<int8_t>(op, in, inout, count);
      break;
    case v1::UINT8:
      ReduceTyped<uint8_t>(op, in, inout, count);
      break;
    case v1::BFLOAT16:
    case v1::FLOAT16:
      ReduceWidened(t, op, in, inout, count);
      break;
    default:
      return absl::InvalidArgumentError(absl::StrFormat(
          "data type %s is not supported on host buffers", DataTypeName(t)));
  }
  return absl::OkStatus();
}

}  // namespace ringmaster
