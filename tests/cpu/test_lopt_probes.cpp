// Per-feature probe MLPs (small_fc_lopt.md 9.2, velo.md 11 T4): weights that route one feature to the
// direction output, so each step of the CPU reference reveals that normalised feature, which is checked
// against an independent float64 evaluation of the specifications over 3 steps on shapes (7,), (5,9),
// (9,5), (8,8), (3,3,4,6), (1,7), with gradients that exercise VeLO's clips.
#include <cmath>

#include "optim/lopt/lopt_common.h"
#include "optim/ref/ref_lopt.h"
#include "tests/cpu/lopt_probes.h"
#include "tests/test_util.h"

namespace {
const std::vector<std::vector<int64_t>> kShapes = {{7}, {5, 9}, {9, 5}, {8, 8}, {3, 3, 4, 6}, {1, 7}};

int64_t numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

// Flat index of coordinates `c` with the axes in `drop` removed (row-major over the rest).
int64_t index_without(const std::vector<int64_t>& shape, std::vector<int64_t> c, std::vector<int> drop) {
  int64_t f = 0;
  for (size_t k = 0; k < shape.size(); k++)
    if (std::find(drop.begin(), drop.end(), int(k)) == drop.end()) f = f * shape[k] + c[k];
  return f;
}
std::vector<int64_t> coords_of(const std::vector<int64_t>& shape, int64_t i) {
  std::vector<int64_t> c(shape.size());
  for (int k = int(shape.size()) - 1; k >= 0; k--) {
    c[size_t(k)] = i % shape[size_t(k)];
    i /= shape[size_t(k)];
  }
  return c;
}

// Float64 oracle of the accumulators and per-element features of one tensor.
struct Oracle {
  std::vector<int64_t> shape;
  FactoredDims fd;
  double bm[3], bv, bf[3];
  std::vector<double> m[3], v, R[3], C[3], V[3];
  bool velo;

  Oracle(std::vector<int64_t> s, bool is_velo, const double* dm, double dv, const double* df)
      : shape(std::move(s)), fd(factored_dims(shape, is_velo ? kVeloPyloTie : kSmallFcPyloTie)), bv(dv), velo(is_velo) {
    const size_t n = size_t(numel(shape));
    for (int k = 0; k < 3; k++) {
      bm[k] = dm[k];
      bf[k] = df[k];
      m[k].assign(n, 0.0);
      if (fd.factored) {
        R[k].assign(n / size_t(shape[size_t(fd.d0)]), 0.0);
        C[k].assign(n / size_t(shape[size_t(fd.d1)]), 0.0);
      } else {
        V[k].assign(n, 0.0);
      }
    }
    v.assign(n, 0.0);
  }

  // Updates the state with g and returns the normalised features (rows: elements) for parameters p.
  std::vector<std::vector<double>> step(const std::vector<double>& g, const std::vector<double>& p) {
    const size_t n = g.size();
    for (size_t i = 0; i < n; i++) {
      for (int k = 0; k < 3; k++) m[k][i] = bm[k] * m[k][i] + (1 - bm[k]) * g[i];
      v[i] = bv * v[i] + (1 - bv) * g[i] * g[i];
      if (!fd.factored)
        for (int k = 0; k < 3; k++) V[k][i] = bf[k] * V[k][i] + (1 - bf[k]) * (g[i] * g[i] + 1e-30);
    }
    std::vector<double> rf[3], cf[3];
    if (fd.factored) {
      std::vector<double> rs(R[0].size(), 0.0), cs(C[0].size(), 0.0);
      for (size_t i = 0; i < n; i++) {
        auto c = coords_of(shape, int64_t(i));
        rs[size_t(index_without(shape, c, {fd.d0}))] += (g[i] * g[i] + 1e-30) / double(shape[size_t(fd.d0)]);
        cs[size_t(index_without(shape, c, {fd.d1}))] += (g[i] * g[i] + 1e-30) / double(shape[size_t(fd.d1)]);
      }
      for (int k = 0; k < 3; k++) {
        for (size_t j = 0; j < rs.size(); j++) R[k][j] = bf[k] * R[k][j] + (1 - bf[k]) * rs[j];
        for (size_t j = 0; j < cs.size(); j++) C[k][j] = bf[k] * C[k][j] + (1 - bf[k]) * cs[j];
        // Mean of R over d1 for each combination of the other axes, indexed through the full shape.
        std::vector<double> mu(n / size_t(shape[size_t(fd.d0)] * shape[size_t(fd.d1)]), 0.0);
        for (size_t i = 0; i < n; i++) {
          auto c = coords_of(shape, int64_t(i));
          if (c[size_t(fd.d0)] != 0) continue;  // each R entry once
          mu[size_t(index_without(shape, c, {fd.d0, fd.d1}))] += R[k][size_t(index_without(shape, c, {fd.d0}))];
        }
        for (auto& x : mu) x /= double(shape[size_t(fd.d1)]);
        rf[k].assign(n, 0.0);
        cf[k].assign(n, 0.0);
        for (size_t i = 0; i < n; i++) {
          auto c = coords_of(shape, int64_t(i));
          double r = R[k][size_t(index_without(shape, c, {fd.d0}))],
                 u = mu[size_t(index_without(shape, c, {fd.d0, fd.d1}))];
          rf[k][i] = 1 / std::sqrt(std::max(r / (u + 1e-9), 1e-9));
          cf[k][i] = 1 / std::sqrt(std::max(C[k][size_t(index_without(shape, c, {fd.d1}))], 1e-9));
        }
      }
    }
    const int nf = velo ? 30 : 28;
    std::vector<std::vector<double>> x(n, std::vector<double>(size_t(nf)));
    for (size_t i = 0; i < n; i++) {
      auto c = coords_of(shape, int64_t(i));
      double row[3], col[3], fg[3], fm[3];
      for (int k = 0; k < 3; k++) {
        if (fd.factored) {
          row[k] = R[k][size_t(index_without(shape, c, {fd.d0}))];
          col[k] = C[k][size_t(index_without(shape, c, {fd.d1}))];
          fg[k] = g[i] * rf[k][i] * cf[k][i];
          fm[k] = m[k][i] * rf[k][i] * cf[k][i];
        } else {
          row[k] = col[k] = V[k][i];
          fg[k] = g[i] / std::sqrt(std::max(V[k][i] + 1e-9, 1e-9));
          fm[k] = velo ? m[k][i] / std::sqrt(V[k][i]) : m[k][i] / std::sqrt(V[k][i] + 1e-6);
        }
      }
      const double s = 1 / std::sqrt(v[i] + 1e-6);
      auto& f = x[i];
      if (velo) {  // velo.md 4.7
        f[0] = g[i];
        f[1] = std::min(0.1, std::max(-0.1, g[i]));
        f[2] = p[i];
        for (int k = 0; k < 3; k++) {
          f[size_t(3 + k)] = m[k][i];
          f[size_t(7 + k)] = m[k][i] * s;
        }
        f[6] = v[i];
        f[10] = s;
        f[14] = g[i] * s;
        for (int k = 0; k < 3; k++) {
          f[size_t(11 + k)] = fg[k];
          f[size_t(15 + k)] = row[k];
          f[size_t(18 + k)] = col[k];
          f[size_t(21 + k)] = 1 / std::sqrt(row[k] + 1e-8);
          f[size_t(24 + k)] = 1 / std::sqrt(col[k] + 1e-8);
          f[size_t(27 + k)] = fm[k];
        }
      } else {  // small_fc_lopt.md 3.5
        f[0] = g[i];
        f[1] = p[i];
        f[5] = v[i];
        f[9] = s;
        for (int k = 0; k < 3; k++) {
          f[size_t(2 + k)] = m[k][i];
          f[size_t(6 + k)] = m[k][i] * s;
          f[size_t(10 + k)] = fg[k];
          f[size_t(13 + k)] = row[k];
          f[size_t(16 + k)] = col[k];
          f[size_t(19 + k)] = 1 / std::sqrt(row[k] + 1e-8);
          f[size_t(22 + k)] = 1 / std::sqrt(col[k] + 1e-8);
          f[size_t(25 + k)] = fm[k];
        }
      }
    }
    for (int ch = 0; ch < nf; ch++) {  // per-tensor normalisation, mean over all elements
      double sq = 0;
      for (size_t i = 0; i < n; i++) sq += x[i][size_t(ch)] * x[i][size_t(ch)];
      const double sc = 1 / std::sqrt(1e-5 + sq / double(n));
      for (size_t i = 0; i < n; i++) x[i][size_t(ch)] *= sc;
    }
    return x;
  }
};

ParamTable single(const std::vector<int64_t>& shape) {
  ParamTable t;
  t.add(tensor_spec("w", shape, shape.size() >= 2 ? Role::Hidden : Role::Bias, false));
  return t;
}

// Gradients with row/column scales, a few entries past 0.1 and past 1000 (VeLO's two clips).
std::vector<float> probe_grad(int64_t n, int seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::normal_distribution<float> z;
  std::vector<float> g(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; i++) g[size_t(i)] = 0.05f * z(rng) * std::exp(0.8f * z(rng));
  g[0] = 0.3f;
  if (n > 3) g[3] = -2500.0f;
  return g;
}
}  // namespace

TEST(Probes, SmallFcEveryFeature) {
  const LoDecays d = small_fc_decays();
  const double dm[3] = {d.m[0], d.m[1], d.m[2]}, df[3] = {d.f[0], d.f[1], d.f[2]};
  for (const auto& shape : kShapes)
    for (int c = 0; c < 39; c++) {
      SCOPED_TRACE(shape_str(shape) + " feature " + std::to_string(c));
      SmallFcWeights w = small_fc_probe_weights(c);  // direction = x_c
      const bool mag_probe = c == 5;                 // and once: magnitude 1000 -> factor e
      if (mag_probe) w.b2[1] = 1000.0f;
      ParamTable t = single(shape);
      OptimOptions o;
      o.small_fc.lr = 100.0;  // step = 100 * 0.01 * x_hat: read x_hat straight off the parameters
      o.small_fc.mup = false;
      auto ref = make_ref_small_fc(t, o, w);
      Oracle orc(shape, false, dm, d.v, df);
      const int64_t n = numel(shape);
      std::mt19937 rng(uint32_t(c + 1));
      std::normal_distribution<float> z;
      std::vector<float> p(size_t(t.total_elems()), 0.0f);
      for (int64_t i = 0; i < n; i++) p[size_t(i)] = 0.05f * z(rng);
      for (int s = 0; s < 3; s++) {
        std::vector<float> g = probe_grad(n, 10 * s + c), gp(p.size(), 0.0f);
        std::copy(g.begin(), g.end(), gp.begin());
        std::vector<double> gd(g.begin(), g.end()), pd(p.begin(), p.begin() + n);
        auto x = orc.step(gd, pd);
        const std::vector<float> before = p;
        ref->step(p, gp);
        const double factor = mag_probe ? std::exp(1.0) : 1.0;
        for (int64_t i = 0; i < n; i++) {
          const double want =
              c < 28 ? x[size_t(i)][size_t(c)]
                     : std::tanh(double(s) / double(std::vector<double>{1, 3, 10, 30, 100, 300, 1000, 3000, 10000,
                                                                        30000, 100000}[size_t(c - 28)]) -
                                 1);
          const double got = (double(before[size_t(i)]) - p[size_t(i)]) / factor;
          ASSERT_NEAR(got, want, 1e-5 * std::max(1.0, std::fabs(want))) << "step " << s << " element " << i;
        }
      }
    }
}

TEST(Probes, VeloEveryFeature) {
  const double dm[3] = {0.9f, 0.99f, 0.999f};
  const VeloWeights base = velo_probe_base();
  for (const auto& shape : kShapes)
    for (int c = 0; c < 30; c++) {
      SCOPED_TRACE(shape_str(shape) + " feature " + std::to_string(c));
      VeloWeights w = base;
      std::vector<float> th = velo_probe_mlp(c);  // direction = x_c
      const bool mag_probe = c == 6;
      if (mag_probe) th[157] = 1000.0f;  // b2[1]: factor exp(1)
      set_velo_candidates(&w, th);
      ParamTable t = single(shape);
      OptimOptions o;
      o.velo.lr = 1000.0;  // step = 1000 * 1e-3 * rms(p) * x_hat
      o.velo.num_steps = 100;
      auto ref = make_ref_velo(t, o, w);
      Oracle orc(shape, true, dm, double(0.999f), dm);
      const int64_t n = numel(shape);
      std::mt19937 rng(uint32_t(c + 7));
      std::normal_distribution<float> z;
      std::vector<float> p(size_t(t.total_elems()), 0.0f);
      for (int64_t i = 0; i < n; i++) p[size_t(i)] = 0.5f * z(rng);
      for (int s = 0; s < 3; s++) {
        std::vector<float> g = probe_grad(n, 10 * s + c + 100), gp(p.size(), 0.0f);
        std::copy(g.begin(), g.end(), gp.begin());
        std::vector<double> gd(static_cast<size_t>(n)), pd(p.begin(), p.begin() + n);
        for (int64_t i = 0; i < n; i++) gd[size_t(i)] = std::min(1000.0, std::max(-1000.0, double(g[size_t(i)])));
        auto x = orc.step(gd, pd);
        double pp = 0;
        for (double q : pd) pp += q * q;
        const double scale = std::sqrt(pp / double(n) + 1e-9) * (mag_probe ? std::exp(1.0) : 1.0);
        const std::vector<float> before = p;
        ref->step(p, gp, 1.0f, 2.0f);
        for (int64_t i = 0; i < n; i++) {
          const double got = (double(before[size_t(i)]) - p[size_t(i)]) / scale;
          ASSERT_NEAR(got, x[size_t(i)][size_t(c)], 1e-5 * std::max(1.0, std::fabs(x[size_t(i)][size_t(c)])))
              << "step " << s << " element " << i;
        }
      }
    }
}

TEST(Probes, VeloDeadMixLayerChangesNothing) {
  ParamTable t = single({6, 4});
  OptimOptions o;
  o.velo.num_steps = 50;
  VeloWeights a = random_velo_weights(4, 0.05f), b = a;
  for (auto& x : b.mix1_w) x += 1.0f;
  auto ra = make_ref_velo(t, o, a), rb = make_ref_velo(t, o, b);
  std::vector<float> pa(size_t(t.total_elems()), 0.1f), pb = pa, g = probe_grad(t.total_elems(), 1);
  for (int s = 0; s < 3; s++) {
    ra->step(pa, g, 1.0f, 2.0f - 0.1f * s);
    rb->step(pb, g, 1.0f, 2.0f - 0.1f * s);
  }
  EXPECT_EQ(pa, pb);
  EXPECT_NE(pa, std::vector<float>(pa.size(), 0.1f));
}
