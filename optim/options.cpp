#include "optim/options.h"

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <iomanip>
#include <sstream>

#include "common/cli.h"
#include "common/error.h"
#include "optim/lopt/celo2_weights.h"
#include "optim/lopt/lopt_weights.h"

namespace {
struct Entry {
  std::string key, help;
  std::function<void(const std::string&)> set;
  std::function<std::string()> get;
};

// The shortest text that reads back as exactly x, so --help shows what will be used (0.1, not
// 0.10000000000000001; 0.00061234567, not 0.000612346).
std::string number_text(double x) {
  std::string t;
  for (int digits = 6; digits <= 17; digits++) {
    std::ostringstream os;
    os << std::setprecision(digits) << x;
    t = os.str();
    if (std::strtod(t.c_str(), nullptr) == x) break;
  }
  return t;
}

// One entry per key, by the type of its value; shared by table() and celo2_keys().
struct Adders {
  std::vector<Entry>& t;
  void num(const std::string& k, double* p, const char* help) const {
    t.push_back({k, help, [k, p](const std::string& v) { *p = parse_number("option " + k, v); },
                 [p] { return number_text(*p); }});
  }
  void integer(const std::string& k, int* p, const char* help) const {
    t.push_back({k, help,
                 [k, p](const std::string& v) { *p = int(parse_integer("option " + k, v, INT32_MIN, INT32_MAX)); },
                 [p] { return str_cat(*p); }});
  }
  void boolean(const std::string& k, bool* p, const char* help) const {
    t.push_back({k, help,
                 [k, p](const std::string& v) {
                   if (v == "1" || v == "true")
                     *p = true;
                   else if (v == "0" || v == "false")
                     *p = false;
                   else
                     user_error("option ", k, " needs true or false, got '", v, "'.");
                 },
                 [p] { return std::string(*p ? "true" : "false"); }});
  }
  void text(const std::string& k, std::string* p, const char* help) const {
    t.push_back({k, help, [p](const std::string& v) { *p = v; }, [p] { return *p; }});
  }
};

// CELO2's and ELO_CELO2's keys (PyLO's argument names where they fit); the AdamW betas and eps exist for
// CELO2 only, since ELO_CELO2's AdamW reads the learned path's accumulators.
void celo2_keys(std::vector<Entry>& t, const std::string& pre, Celo2Options* c, bool own_adam) {
  const Adders a{t};
  a.num(pre + "lr", &c->lr, "learning rate of the learned step (AdamW side: x adam_lr_mult)");
  a.num(pre + "wd", &c->weight_decay, "decoupled weight decay of the learned path, on p before the step (x lr)");
  a.num(pre + "adam_lr_mult", &c->adam_lr_mult, "AdamW side path's lr = lr x this");
  a.num(pre + "adam_wd", &c->adam_weight_decay, "AdamW side path's weight decay (x its lr); < 0: the same as wd");
  if (own_adam) {
    a.num(pre + "adam_beta1", &c->adam_beta1, "AdamW side path's first-moment decay");
    a.num(pre + "adam_beta2", &c->adam_beta2, "AdamW side path's second-moment decay");
    a.num(pre + "adam_eps", &c->adam_eps, "AdamW side path's eps, added to sqrt(v_hat)");
  }
  a.boolean(pre + "adamw_1d", &c->adamw_1d,
            "vectors and embeddings take the AdamW side path (false: all take the MLP)");
  a.boolean(pre + "adamw_head", &c->adamw_head, "heads count as embeddings and take AdamW");
  a.boolean(pre + "orthogonalize", &c->orthogonalize, "Newton-Schulz on matrices' directions (false: celo2-base)");
  a.boolean(pre + "clip_grad", &c->clip_grad, "clip all gradients to a global norm of clip_norm (optax)");
  a.num(pre + "clip_norm", &c->clip_norm, "global norm for clip_grad");
  a.num(pre + "grad_clip_val", &c->grad_clip_val, "every gradient element clamped to +-this (after clip_grad)");
  a.num(pre + "exp_mult", &c->exp_mult, "direction x exp(exp_mult x magnitude)");
  a.num(pre + "rmsmult", &c->rmsmult, "RMS of the learned step before lr");
  a.boolean(pre + "param_scale_mult", &c->param_scale_mult,
            "scale the direction by rms(p) (removed by the normalisation)");
  a.integer(pre + "ns_steps", &c->ns_steps, "Newton-Schulz iterations");
  a.num(pre + "ns_a", &c->ns_a, "Newton-Schulz coefficient a");
  a.num(pre + "ns_b", &c->ns_b, "Newton-Schulz coefficient b");
  a.num(pre + "ns_c", &c->ns_c, "Newton-Schulz coefficient c");
  a.num(pre + "ns_eps", &c->ns_eps, "added to the Frobenius norm before Newton-Schulz");
  a.text(pre + "ns", &c->ns, "GPU Newton-Schulz precision: bf16 (fast, as Muon), tf32, or fp32 (exact, as PyLO)");
  a.boolean(pre + "fast", &c->fast,
            "pass C's MLP on tensor cores for 2-D matrices (bf16/fp16 operands) instead of fp32");
  a.boolean(pre + "bf16_record", &c->bf16_record,
            "the learned tensors' momenta and second moment in bf16, rounded stochastically");
  a.text(pre + "weights", &c->weights,
         own_adam ? "folder with model.safetensors, CELO2MLP layout (default optim/lopt/weights/celo2, shipped)"
                  : "folder with model.safetensors, CELO2MLP layout (default weights/elo-celo2)");
  a.text(pre + "tie", &c->tie, "factored dims of tied axes: pylo (PyLO CELO2 = argsort), argsort, swapped");
}

std::vector<Entry> table(OptimOptions& o) {
  std::vector<Entry> t;
  const Adders add{t};
  auto num = [&](const std::string& k, double* p, const char* help) { add.num(k, p, help); };
  auto integer = [&](const std::string& k, int* p, const char* help) { add.integer(k, p, help); };
  auto boolean = [&](const std::string& k, bool* p, const char* help) { add.boolean(k, p, help); };
  auto text = [&](const std::string& k, std::string* p, const char* help) { add.text(k, p, help); };
  auto adamw = [&](const std::string& pre, AdamWOptions* a) {
    num(pre + "lr", &a->lr, "learning rate");
    num(pre + "beta1", &a->beta1, "first-moment decay");
    num(pre + "beta2", &a->beta2, "second-moment decay");
    num(pre + "eps", &a->eps, "added to sqrt(v_hat)");
    num(pre + "wd", &a->weight_decay, "decoupled weight decay (tensors with decay on)");
  };
  adamw("adamw.", &o.adamw);
  num("adafactor.lr", &o.adafactor.lr, "maximum relative step size rho_t; also scales weight decay");
  num("adafactor.beta2_decay", &o.adafactor.beta2_decay, "second-moment weight is t^beta2_decay");
  num("adafactor.eps1", &o.adafactor.eps1, "floor of sqrt(V_hat); < 0 means fp32 epsilon 2^-23");
  num("adafactor.eps2", &o.adafactor.eps2, "floor of RMS(param) in the relative step");
  num("adafactor.d", &o.adafactor.d, "update clipping threshold");
  num("adafactor.wd", &o.adafactor.weight_decay, "decoupled weight decay");
  num("muon.lr", &o.muon.lr, "learning rate of the orthogonalised step");
  num("muon.wd", &o.muon.weight_decay, "decoupled weight decay (uses the unadjusted lr)");
  num("muon.momentum", &o.muon.momentum, "momentum mu");
  boolean("muon.nesterov", &o.muon.nesterov, "Nesterov momentum");
  integer("muon.ns_steps", &o.muon.ns_steps, "Newton-Schulz iterations");
  num("muon.eps", &o.muon.eps, "floor of the Frobenius norm before Newton-Schulz");
  num("muon.a", &o.muon.ns_a, "Newton-Schulz coefficient a");
  num("muon.b", &o.muon.ns_b, "Newton-Schulz coefficient b");
  num("muon.c", &o.muon.ns_c, "Newton-Schulz coefficient c");
  t.push_back({"muon.adjust_lr", "original (sqrt(max(1,rows/cols))) or match_rms_adamw (0.2*sqrt(max(rows,cols)))",
               [&o](const std::string& v) { o.muon.adjust_lr = v; }, [&o] { return o.muon.adjust_lr; }});
  num("muon.ns_workspace_mb", &o.muon.ns_workspace_mb, "cap on Newton-Schulz scratch memory (MiB)");
  adamw("muon.aux.", &o.muon.aux);
  num("small_fc_lopt.lr", &o.small_fc.lr, "multiplier of the learned step (PyLO lr; 1 = as meta-trained)");
  num("small_fc_lopt.wd", &o.small_fc.weight_decay, "decoupled weight decay after the step (x lr)");
  boolean("small_fc_lopt.mup", &o.small_fc.mup, "MuLO: hidden matrices' steps x 1/fan_in");
  boolean("small_fc_lopt.fast", &o.small_fc.fast, "MLP on tensor cores (bf16 mma) instead of exact fp32");
  boolean("small_fc_lopt.bf16_record", &o.small_fc.bf16_record,
          "momenta and second moment in bf16, rounded stochastically");
  text("small_fc_lopt.weights", &o.small_fc.weights, "folder with model.safetensors (default weights/mulo)");
  text("small_fc_lopt.tie", &o.small_fc.tie,
       "factored dims of tied axes: pylo (PyLO AdafacLO/MuLO = argsort), argsort (numpy order: the later of two "
       "equal axes is reduced for R), swapped (ties swapped: square (out,in) matrices get JAX meta-training's roles)");
  num("velo.lr", &o.velo.lr, "multiplier of VeLO's step (1 = VeLO)");
  num("velo.wd", &o.velo.weight_decay, "decoupled weight decay after the step (x lr)");
  t.push_back({"velo.num_steps", "planned number of updates (fraction-of-training and loss features)",
               [&o](const std::string& v) {
                 o.velo.num_steps = parse_integer("option velo.num_steps", v, INT64_MIN, INT64_MAX);
               },
               [&o] { return std::to_string(o.velo.num_steps); }});
  boolean("velo.bf16_record", &o.velo.bf16_record, "momenta and second moment in bf16, rounded stochastically");
  text("velo.weights", &o.velo.weights, "folder with VeLO_RNN/ and VeLO_MLP/, or a JAX params file (default weights)");
  text("velo.tie", &o.velo.tie,
       "factored dims of tied axes: pylo (PyLO VeLO = swapped), swapped (ties swapped except rank-4 (0,1) ties), "
       "argsort (numpy order, as the JAX code on its own layout)");
  celo2_keys(t, "celo2.", &o.celo2, true);
  celo2_keys(t, "elo_celo2.", &o.elo_celo2, false);
  num("elo.lr", &o.elo.lr, "learning rate: p -= lr * (dir * exp(exp_mult * mag) + wd * p)");
  num("elo.wd", &o.elo.weight_decay, "decoupled weight decay on the parameter before the step (x lr)");
  num("elo.exp_mult", &o.elo.exp_mult, "magnitude exponent multiplier");
  boolean("elo.clip_grad", &o.elo.clip_grad, "clip all gradients to a global norm of elo.clip_norm (optax)");
  num("elo.clip_norm", &o.elo.clip_norm, "global norm for elo.clip_grad");
  boolean("elo.fast", &o.elo.fast, "MLP on tensor cores (bf16 mma) instead of exact fp32");
  text("elo.weights", &o.elo.weights, "folder with model.safetensors, MetaMLP layout (default weights/elo)");
  text("elo.tie", &o.elo.tie, "factored dims of tied axes: pylo (PyLO ELO = argsort), argsort, swapped");
  return t;
}

void check_range(bool ok, const std::string& what, double got, const char* range) {
  if (!ok) user_error(what, " must be ", range, " (got ", got, ").");
}

void validate_celo2(const std::string& pre, const Celo2Options& c) {
  check_range(c.lr >= 0, pre + "lr", c.lr, ">= 0");
  check_range(c.weight_decay >= 0, pre + "wd", c.weight_decay, ">= 0");
  check_range(c.adam_lr_mult >= 0, pre + "adam_lr_mult", c.adam_lr_mult, ">= 0");
  check_range(c.adam_beta1 >= 0 && c.adam_beta1 < 1, pre + "adam_beta1", c.adam_beta1, "in [0, 1)");
  check_range(c.adam_beta2 >= 0 && c.adam_beta2 < 1, pre + "adam_beta2", c.adam_beta2, "in [0, 1)");
  check_range(c.adam_eps >= 0, pre + "adam_eps", c.adam_eps, ">= 0");
  check_range(c.clip_norm > 0, pre + "clip_norm", c.clip_norm, "> 0");
  check_range(c.grad_clip_val > 0, pre + "grad_clip_val", c.grad_clip_val, "> 0");
  check_range(c.rmsmult >= 0, pre + "rmsmult", c.rmsmult, ">= 0");
  check_range(c.ns_steps >= 1 && c.ns_steps < 100, pre + "ns_steps", c.ns_steps, "in [1, 99]");
  check_range(c.ns_eps >= 0, pre + "ns_eps", c.ns_eps, ">= 0");
  if (c.ns != "bf16" && c.ns != "tf32" && c.ns != "fp32")
    user_error(pre, "ns must be bf16, tf32 or fp32 (got '", c.ns, "').");
  parse_tie_rule(c.tie, kCelo2PyloTie);
}

void validate_adamw(const std::string& pre, const AdamWOptions& a) {
  check_range(a.lr >= 0, pre + "lr", a.lr, ">= 0");
  check_range(a.beta1 >= 0 && a.beta1 < 1, pre + "beta1", a.beta1, "in [0, 1)");
  check_range(a.beta2 >= 0 && a.beta2 < 1, pre + "beta2", a.beta2, "in [0, 1)");
  check_range(a.eps >= 0, pre + "eps", a.eps, ">= 0");
  check_range(a.weight_decay >= 0, pre + "wd", a.weight_decay, ">= 0");
}
}  // namespace

void set_option(OptimOptions& o, const std::string& kv) {
  auto eq = kv.find('=');
  if (eq == std::string::npos) user_error("optimizer option '", kv, "' must look like key=value, e.g. adamw.lr=3e-4.");
  std::string key = kv.substr(0, eq), value = kv.substr(eq + 1);
  for (auto& e : table(o))
    if (e.key == key) return e.set(value);
  user_error("unknown optimizer option '", key, "'; run with --help to list them.");
}

// An option's first component is the optimizer that reads it (muon.aux.* is Muon's AdamW for the
// tensors Muon does not take, so it belongs to muon); the names are those of optimizer_names().
std::string option_optimizer(const std::string& key) { return key.substr(0, key.find('.')); }

void check_options_apply(const std::vector<std::string>& sets, const std::vector<std::string>& selected) {
  for (const auto& kv : sets) {
    const std::string owner = option_optimizer(kv.substr(0, kv.find('=')));
    bool used = false;
    for (const auto& name : selected) used |= name == owner;
    if (used) continue;
    std::string list;
    for (const auto& name : selected) list += (list.empty() ? "" : ", ") + name;
    user_error("option ", kv, " is for ", owner, ", which is not the optimizer selected (", list,
               "); remove it or choose -o ", owner, ".");
  }
}

// Each -o name with one line on what it is; the order of optimizer_names() and of the --help sections.
const std::vector<std::pair<std::string, std::string>>& optimizer_summaries() {
  static const std::vector<std::pair<std::string, std::string>> list = {
      {"adamw", "AdamW (torch's fused AdamW)"},
      {"adafactor", "Adafactor (torch.optim.Adafactor): factored second moments, relative step size"},
      {"muon", "Muon (torch.optim.Muon): orthogonalised momentum on hidden matrices, AdamW (muon.aux) on the rest"},
      {"velo", "VeLO, learned: a per-tensor LSTM and a per-element MLP; reads the loss (weights/VeLO_*)"},
      {"small_fc_lopt", "muLO / small_fc_lopt, learned: a per-element MLP on Adafactor-style features (weights/mulo)"},
      {"celo2", "CELO2, learned: a per-element MLP, then Newton-Schulz, on matrices; AdamW on the rest (weights ship)"},
      {"elo", "ELO, learned: small_fc_lopt's network with fixed decays (weights/elo)"},
      {"elo_celo2", "ELO_CELO2, learned: CELO2's rule with ELO's meta-training (weights/elo-celo2)"}};
  return list;
}

std::string options_help(const OptimOptions& o) {
  std::string out = "optimizers (-o):\n";
  for (const auto& [name, what] : optimizer_summaries()) {
    std::string left = "  " + name;
    left.resize(17, ' ');
    out += left + what + "\n";
  }
  // Then each optimizer's options (--set key=value), one section each: "key=value  help", the help in a
  // column as the flags have it.
  const std::vector<std::string> lines = describe_options(o);
  for (const auto& name : optimizer_names()) {
    out += "\n" + name + " options (--set " + name + ".KEY=VALUE):\n";
    for (const auto& line : lines) {
      if (option_optimizer(line.substr(0, line.find('='))) != name) continue;
      const size_t gap = line.find("  ");
      std::string left = "  " + line.substr(0, gap);
      if (left.size() < 34) left.resize(34, ' ');
      out += left + (gap == std::string::npos ? "" : " " + line.substr(gap + 2)) + "\n";
    }
  }
  return out;
}

std::unique_ptr<TempDir> write_random_lopt_weights(const std::vector<std::string>& optimizers, OptimOptions& o,
                                                   uint64_t seed) {
  bool small_fc = false, velo = false, elo = false, elo_celo2 = false;
  for (const auto& name : optimizers) {
    small_fc |= name == "small_fc_lopt" && o.small_fc.weights.empty();
    velo |= name == "velo" && o.velo.weights.empty();
    elo |= name == "elo" && o.elo.weights.empty();
    elo_celo2 |= name == "elo_celo2" && o.elo_celo2.weights.empty();  // CELO2's real weights ship: none needed
  }
  if (!small_fc && !velo && !elo && !elo_celo2) return nullptr;
  auto dir = std::make_unique<TempDir>("lopt_random_weights_");
  if (elo) {
    o.elo.weights = dir->path() + "/elo";
    save_small_fc_weights(o.elo.weights, random_small_fc_weights(seed));
  }
  if (elo_celo2) {
    o.elo_celo2.weights = dir->path() + "/elo-celo2";
    save_celo2_weights(o.elo_celo2.weights, random_celo2_weights(seed));
  }
  if (small_fc) {
    o.small_fc.weights = dir->path() + "/mulo";
    save_small_fc_weights(o.small_fc.weights, random_small_fc_weights(seed));
  }
  if (velo) {
    o.velo.weights = dir->path();
    save_velo_weights_pylo(o.velo.weights, random_velo_weights(seed));
  }
  return dir;
}

void check_lopt_weights(const std::string& name, const OptimOptions& o) {
  if (name == "small_fc_lopt") load_small_fc_weights(o.small_fc.weights);
  if (name == "velo") load_velo_weights(o.velo.weights);
  if (name == "celo2") load_celo2_weights(o.celo2.weights);
  if (name == "elo_celo2") load_elo_celo2_weights(o.elo_celo2.weights);
  if (name == "elo") load_elo_weights(o.elo.weights);
}

std::vector<std::string> describe_options(const OptimOptions& o) {
  OptimOptions copy = o;
  std::vector<std::string> out;
  for (auto& e : table(copy)) out.push_back(str_cat(e.key, "=", e.get(), "  ", e.help));
  return out;
}

const std::vector<std::string>& optimizer_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& s : optimizer_summaries()) n.push_back(s.first);
    return n;
  }();
  return names;
}

void check_optimizer_name(const std::string& name) {
  for (const auto& n : optimizer_names())
    if (n == name) return;
  std::string list;
  for (const auto& n : optimizer_names()) list += (list.empty() ? "" : ", ") + n;
  user_error("unknown optimizer '", name, "'; choose one of ", list, ".");
}

void validate_options(const std::string& name, const OptimOptions& o) {
  check_optimizer_name(name);
  if (name == "adamw") validate_adamw("adamw.", o.adamw);
  if (name == "adafactor") {
    const auto& a = o.adafactor;
    check_range(a.lr >= 0, "adafactor.lr", a.lr, ">= 0");
    check_range(a.beta2_decay <= 0, "adafactor.beta2_decay", a.beta2_decay, "<= 0");
    check_range(a.eps2 >= 0, "adafactor.eps2", a.eps2, ">= 0");
    check_range(a.d >= 1, "adafactor.d", a.d, ">= 1");
    check_range(a.weight_decay >= 0, "adafactor.wd", a.weight_decay, ">= 0");
  }
  if (name == "muon") {
    const auto& m = o.muon;
    check_range(m.lr >= 0, "muon.lr", m.lr, ">= 0");
    check_range(m.weight_decay >= 0, "muon.wd", m.weight_decay, ">= 0");
    check_range(m.momentum >= 0 && m.momentum < 1, "muon.momentum", m.momentum, "in [0, 1)");
    check_range(m.ns_steps >= 1 && m.ns_steps < 100, "muon.ns_steps", m.ns_steps, "in [1, 99]");
    check_range(m.eps > 0, "muon.eps", m.eps, "> 0");
    // At most 1 TiB, more than any GPU holds: the cap becomes a byte count and a count of matrices.
    check_range(m.ns_workspace_mb >= 16 && m.ns_workspace_mb <= 1 << 20, "muon.ns_workspace_mb", m.ns_workspace_mb,
                "in [16, 1048576] MiB");
    if (m.adjust_lr != "original" && m.adjust_lr != "match_rms_adamw")
      user_error("muon.adjust_lr must be original or match_rms_adamw (got '", m.adjust_lr, "').");
    validate_adamw("muon.aux.", m.aux);
  }
  if (name == "small_fc_lopt") {
    check_range(o.small_fc.lr >= 0, "small_fc_lopt.lr", o.small_fc.lr, ">= 0");
    check_range(o.small_fc.weight_decay >= 0, "small_fc_lopt.wd", o.small_fc.weight_decay, ">= 0");
    parse_tie_rule(o.small_fc.tie, kSmallFcPyloTie);
  }
  if (name == "celo2") validate_celo2("celo2.", o.celo2);
  if (name == "elo_celo2") validate_celo2("elo_celo2.", o.elo_celo2);
  if (name == "elo") {
    check_range(o.elo.lr >= 0, "elo.lr", o.elo.lr, ">= 0");
    check_range(o.elo.weight_decay >= 0, "elo.wd", o.elo.weight_decay, ">= 0");
    check_range(o.elo.clip_norm > 0, "elo.clip_norm", o.elo.clip_norm, "> 0");
    parse_tie_rule(o.elo.tie, kEloPyloTie);
  }
  if (name == "velo") {
    check_range(o.velo.lr >= 0, "velo.lr", o.velo.lr, ">= 0");
    check_range(o.velo.weight_decay >= 0, "velo.wd", o.velo.weight_decay, ">= 0");
    check_range(o.velo.num_steps >= 1, "velo.num_steps", double(o.velo.num_steps), ">= 1");
    parse_tie_rule(o.velo.tie, kVeloPyloTie);
  }
}
