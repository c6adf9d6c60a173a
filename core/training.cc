#include "core/training.h"

#include <algorithm>
#include <cmath>

namespace ringmaster {
double Gelu(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }

double GeluGrad(double x) {
  const double cdf = 0.5 * (1.0 + std::erf(x / std::sqrt(2.0)));
  const double pdf = std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI);
  return cdf + x * pdf;
}

double TrainStepFlops(const MlpShape& s) {
  return 6.0 * static_cast<double>(s.batch) * s.hidden * s.hidden * s.layers;
}
double ForwardFlops(const MlpShape& s) {
  return 2.0 * static_cast<double>(s.batch) * s.hidden * s.hidden * s.layers;
}

std::vector<std::vector<int>> GradientBuckets(int layers,
                                              int64_t bytes_per_layer,
                                              int64_t cap_bytes) {
  std::vector<std::vector<int>> buckets;
  int64_t filled = 0;
  for (int l = layers - 1; l >= 0; --l) {
    if (buckets.empty() || filled + bytes_per_layer > cap_bytes) {
      buckets.emplace_back();
      filled = 0;
    }
    buckets.back().push_back(l);
    filled += bytes_per_layer;
  }
  return buckets;
}

std::vector<std::vector<int>> PipelinedBuckets(int layers, int deferred,
                                               int64_t bytes_per_layer,
                                               int64_t cap_bytes) {
  deferred = std::clamp(deferred, 0, layers);
  std::vector<std::vector<int>> out =
      GradientBuckets(layers - deferred, bytes_per_layer, cap_bytes);
  for (auto& b : out) {
    for (int& l : b) l += deferred;
  }
  std::vector<std::vector<int>> lower =
      GradientBuckets(deferred, bytes_per_layer, cap_bytes);
  for (auto it = lower.rbegin(); it != lower.rend(); ++it) {
    out.emplace_back(it->rbegin(), it->rend());
  }
  return out;
}

double WeakEfficiency(double t1, double tn) { return tn > 0 ? t1 / tn : 0; }
double StrongEfficiency(double t1, double tn, int n) {
  return tn > 0 && n > 0 ? t1 / (n * tn) : 0;
}

std::vector<double> ReferenceLosses(const MlpShape& shape,
                                    const std::string& optimizer, double lr,
                                    int steps) {
  const int L = shape.layers;
  const int64_t H = shape.hidden, B = shape.batch;
  // Row-major: activations [B, H]; weights W[l] [H_out, H_in], y = x W^T.
  std::vector<std::vector<double>> w(L, std::vector<double>(H * H));
  for (int l = 0; l < L; ++l) {
    for (int64_t r = 0; r < H; ++r) {
      for (int64_t c = 0; c < H; ++c) w[l][r * H + c] = TrainWeight(l, r, c, H);
    }
  }
  std::vector<std::vector<double>> m(L, std::vector<double>(H * H, 0)), v = m;
  std::vector<std::vector<double>> a(L + 1, std::vector<double>(B * H)),
      z(L, std::vector<double>(B * H));
  for (int64_t s = 0; s < B; ++s) {
    for (int64_t f = 0; f < H; ++f) a[0][s * H + f] = TrainInput(s, f);
  }
  std::vector<double> losses;
  std::vector<double> grad(H * H), da(B * H), dz(B * H);
  for (int step = 0; step < steps; ++step) {
    for (int l = 0; l < L; ++l) {
      for (int64_t s = 0; s < B; ++s) {
        for (int64_t o = 0; o < H; ++o) {
          double acc = 0;
          for (int64_t i = 0; i < H; ++i)
            acc += a[l][s * H + i] * w[l][o * H + i];
          z[l][s * H + o] = acc;
          a[l + 1][s * H + o] = Gelu(acc);
        }
      }
    }
    double loss = 0;
    for (double x : a[L]) loss += x * x;
    const double count = static_cast<double>(B * H);
    losses.push_back(loss / count);
    for (int64_t i = 0; i < B * H; ++i) da[i] = 2.0 * a[L][i] / count;
    for (int l = L - 1; l >= 0; --l) {
      for (int64_t i = 0; i < B * H; ++i) dz[i] = da[i] * GeluGrad(z[l][i]);
      // dW[o][i] = sum_s dz[s][o] a[s][i]; da_prev[s][i] = sum_o dz[s][o]
      // W[o][i].
      std::fill(grad.begin(), grad.end(), 0.0);
      for (int64_t s = 0; s < B; ++s) {
        for (int64_t o = 0; o < H; ++o) {
          const double g = dz[s * H + o];
          for (int64_t i = 0; i < H; ++i)
            grad[o * H + i] += g * a[l][s * H + i];
        }
      }
      if (l > 0) {
        for (int64_t s = 0; s < B; ++s) {
          for (int64_t i = 0; i < H; ++i) {
            double acc = 0;
            for (int64_t o = 0; o < H; ++o)
              acc += dz[s * H + o] * w[l][o * H + i];
            da[s * H + i] = acc;
          }
        }
      }
      if (optimizer == "adam") {
        const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
        const double c1 = 1 - std::pow(b1, step + 1),
                     c2 = 1 - std::pow(b2, step + 1);
        for (int64_t k = 0; k < H * H; ++k) {
          m[l][k] = b1 * m[l][k] + (1 - b1) * grad[k];
          v[l][k] = b2 * v[l][k] + (1 - b2) * grad[k] * grad[k];
          w[l][k] -= lr * (m[l][k] / c1) / (std::sqrt(v[l][k] / c2) + eps);
        }
      } else {
        for (int64_t k = 0; k < H * H; ++k) w[l][k] -= lr * grad[k];
      }
    }
  }
  return losses;
}

}  // namespace ringmaster
