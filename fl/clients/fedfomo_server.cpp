// FedFomo's server part (PFL-FACTS §9; NVlabs/FedFomo server.py, federation.py, client.py; PFLlib
// serverfomo.py) and the math of fedfomo.h.
//
// State, kept across rounds and checkpointed:
//   P        (N, N) affinity, starts as the identity (PFLlib; NVlabs starts the own entry at 0.1, the rest 0:
//            the own entry never matters, a client is never offered its own model).
//   models   per client that has uploaded, the model it last uploaded: global + upload (after the model
//            attacks: what the server received). D floats each.
//   last     the clients whose uploads the last round accepted (the download pool, NVlabs' uploaded_clients).
// Per round, for each sampled client i (message): up to M - 1 other clients chosen e-greedily by P[i, .]
// from the pool, their ids ("fomo_ids") and stored models ("fomo_models", one row of D per id). The client
// weighs them with its own current model (M models in all: the paper's "5 models" are the client's own plus
// 4 downloaded, NVlabs' --num_update_clients 4) and uploads (id, w_n) pairs; after aggregation the server
// adds them to P[i, .] and stores each accepted client's model.
// The global model: FedFomo has none. The server rule's update is zeroed, so the global state stays the
// common initial model: the model a client starts from before its first participation, and the reference
// the uploads are differences to (the server recovers a model as global + upload). Its acc/loss columns
// are therefore the initial model's; read the personalised columns.
// Memory: N^2 floats for P plus D floats per client that has uploaded (at most N x D): 100 clients x LeNet
// (D = 44,426 on 1x28x28) 17.8 MB; x cnn-fedfsa (D = 1,258,798) 503.5 MB. Messages: (M - 1) x D floats per
// sampled client, held for the round.
#include <algorithm>
#include <limits>
#include <cmath>
#include <map>
#include <numeric>

#include "fl/clients/fedfomo.h"
#include "tensor/error.h"

namespace bastion {

double fomo_distance(std::span<const float> a, std::span<const float> b, bool l1) {
  BASTION_CHECK(a.size() == b.size(), "fedfomo: models of ", a.size(), " and ", b.size(), " values");
  double sum = 0.0;
  for (size_t j = 0; j < a.size(); ++j) {
    const double d = static_cast<double>(a[j]) - b[j];
    sum += l1 ? std::abs(d) : d * d;
  }
  return l1 ? sum : std::sqrt(sum);
}

double fomo_weight(double reference_loss, double candidate_loss, double distance, double eps) {
  return (reference_loss - candidate_loss) / (distance + eps);
}

std::vector<double> fomo_mixing_weights(const std::vector<double>& raw) {
  std::vector<double> w(raw.size(), 0.0);
  double sum = 0.0;
  for (size_t n = 0; n < raw.size(); ++n) {
    if (std::isfinite(raw[n]) && raw[n] > 0.0) w[n] = raw[n];
    sum += w[n];
  }
  if (!(sum > 0.0)) return {};
  for (double& v : w) v /= sum;
  return w;
}

std::vector<double> fomo_affinity_increments(const std::vector<double>& raw, bool normalised) {
  std::vector<double> out(raw.size(), 0.0);
  double sum = 0.0;
  for (size_t n = 0; n < raw.size(); ++n)
    if (std::isfinite(raw[n])) out[n] = raw[n], sum += raw[n];
  if (!normalised) return out;
  const double scale = 1.0 / std::max(std::abs(sum), 1e-9);  // NVlabs update_client_weights
  for (double& v : out) v *= scale;
  return out;
}

std::vector<int64_t> fomo_choose(std::span<const float> affinity, const std::vector<int64_t>& pool, int64_t count,
                                 double epsilon, Generator& rng) {
  const size_t n = pool.size();
  std::vector<double> tie(n);
  for (double& t : tie) t = rng.uniform();
  std::vector<size_t> top(n);
  std::iota(top.begin(), top.end(), size_t{0});
  std::sort(top.begin(), top.end(), [&](size_t a, size_t b) {  // largest P first, ties by the random key
    const float pa = affinity[static_cast<size_t>(pool[a])], pb = affinity[static_cast<size_t>(pool[b])];
    return pa != pb ? pa > pb : tie[a] > tie[b];
  });
  std::vector<size_t> random_order(n);
  std::iota(random_order.begin(), random_order.end(), size_t{0});
  for (size_t k = n; k > 1; --k) std::swap(random_order[k - 1], random_order[rng.below(k)]);  // Fisher-Yates
  std::vector<int64_t> chosen;
  std::vector<uint8_t> taken(n, 0);
  size_t next_top = 0, next_random = 0;
  const size_t slots = std::min(n, static_cast<size_t>(std::max<int64_t>(count, 0)));
  while (chosen.size() < slots) {
    const bool explore = rng.uniform() < epsilon;
    for (;;) {  // NVlabs get_federating_clients: pop from the list this slot draws from until a new client
      const size_t k = explore ? random_order[next_random++] : top[next_top++];
      if (taken[k]) continue;
      taken[k] = 1;
      chosen.push_back(pool[k]);
      break;
    }
  }
  return chosen;
}

double fomo_epsilon(double epsilon, double decay, int64_t round) {
  return std::max(0.0, epsilon - decay * static_cast<double>(round - 1));
}

namespace {

class FomoServer final : public MethodServer {
 public:
  FomoServer(int64_t clients, const FomoServerOptions& options)
      : N_(clients), options_(options), affinity_(static_cast<size_t>(clients * clients), 0.0f) {
    for (int64_t i = 0; i < N_; ++i) affinity_[static_cast<size_t>(i * N_ + i)] = 1.0f;
  }

  void begin_round(const RoundStart& start) override {
    round_ = start.round;
    seed_ = start.seed;
  }

  void message(int64_t client, std::span<const float>, ClientMessage& out) const override {
    if (!options_.store_models) return;
    std::vector<int64_t> pool;
    if (options_.pool_all) {
      for (const auto& [id, model] : models_) pool.push_back(id);
    } else {
      pool = last_;
    }
    pool.erase(std::remove(pool.begin(), pool.end(), client), pool.end());
    Generator rng = Generator(seed_).fork(static_cast<uint64_t>(client));
    const double epsilon = fomo_epsilon(options_.epsilon, options_.epsilon_decay, round_);
    const std::vector<int64_t> chosen = fomo_choose(row(client), pool, options_.models - 1, epsilon, rng);
    if (chosen.empty()) return;
    std::vector<float>& ids = out[kFomoIds];
    std::vector<float>& models = out[kFomoModels];
    for (int64_t id : chosen) {
      const std::vector<float>& model = models_.at(id);
      ids.push_back(static_cast<float>(id));  // exact: client ids are far below 2^24
      models.insert(models.end(), model.begin(), model.end());
    }
  }

  void after_aggregation(const MethodRound& round, std::span<float> update) override {
    for (int64_t r = 0; r < round.n; ++r) {
      const int64_t client = (*round.clients)[r];
      add_affinity(client, round.extra ? (*round.extra)[r] : std::span<const float>{});
      if (options_.store_models) store_model(client, round, r);
    }
    last_.assign(round.clients->begin(), round.clients->begin() + round.n);
    std::fill(update.begin(), update.end(), 0.0f);  // no global model: it stays the initial one
  }

  // Blocks: "clients" (N), "width" (D), "affinity" (N x N), "last" (ids), the per-client "models" (D each).
  RuleState save_state() const override {
    RuleState state("fedfomo");
    state.put_int("clients", N_);
    state.put_int("width", width_);
    state.put_floats("affinity", affinity_);
    state.put_ints("last", last_);
    state.put_per_client("models", models_);
    return state;
  }

  void load_state(const RuleState& state) override {
    if (state.empty()) return;  // a checkpoint from before the first round
    if (!state.legacy().empty()) return load_legacy(state.legacy());
    BASTION_CHECK(state.int_in("clients", 0, std::numeric_limits<int64_t>::max()) == N_, "fedfomo state: written for ",
                  state.ints("clients")[0], " clients, this run has ", N_);
    const int64_t width = state.int_in("width", 0, std::numeric_limits<int32_t>::max());
    const std::vector<float>& affinity = state.floats("affinity");
    BASTION_CHECK(affinity.size() == affinity_.size(), "fedfomo state: an affinity matrix of ", affinity.size(),
                  " values, expected ", affinity_.size());
    std::vector<int64_t> last = state.ids_below("last", N_);
    models_ = state.per_client("models", N_, static_cast<size_t>(width));
    width_ = width;
    affinity_ = affinity;
    last_ = std::move(last);
  }

  // The float layout of checkpoints written before the codec: [N, D, affinity (N N), count, ids, count,
  // then (id, D values) records].
  void load_legacy(std::span<const float> state) {
    size_t at = 0;
    auto next = [&]() {
      BASTION_CHECK(at < state.size(), "fedfomo state: truncated");
      return state[at++];
    };
    BASTION_CHECK(static_cast<int64_t>(next()) == N_, "fedfomo state: written for ", state[0],
                  " clients, this run has ", N_);
    width_ = static_cast<int64_t>(next());
    BASTION_CHECK(at + affinity_.size() <= state.size(), "fedfomo state: truncated");
    std::copy_n(state.begin() + at, affinity_.size(), affinity_.begin());
    at += affinity_.size();
    last_.resize(static_cast<size_t>(next()));
    for (int64_t& id : last_) id = checked_client(next());
    const size_t count = static_cast<size_t>(next());
    models_.clear();
    for (size_t k = 0; k < count; ++k) {
      const int64_t id = checked_client(next());
      BASTION_CHECK(at + static_cast<size_t>(width_) <= state.size(), "fedfomo state: truncated");
      models_[id].assign(state.begin() + at, state.begin() + at + width_);
      at += static_cast<size_t>(width_);
    }
    BASTION_CHECK(at == state.size(), "fedfomo state: ", state.size() - at, " values left over");
  }

 private:
  int64_t N_;
  FomoServerOptions options_;
  std::vector<float> affinity_;  // (N, N) row-major
  std::map<int64_t, std::vector<float>> models_;
  std::vector<int64_t> last_;
  int64_t width_ = 0;  // D, known from the first round's uploads
  int64_t round_ = 1;
  uint64_t seed_ = 0;

  std::span<const float> row(int64_t client) const {
    return std::span<const float>(affinity_).subspan(static_cast<size_t>(client * N_), static_cast<size_t>(N_));
  }

  int64_t checked_client(float value) const {
    const int64_t id = static_cast<int64_t>(value);
    BASTION_CHECK(id >= 0 && id < N_ && static_cast<float>(id) == value, "fedfomo: client id ", value, " outside [0, ",
                  N_, ")");
    return id;
  }

  // The extra upload: (id, w_n) pairs. A malformed one (odd length, an id outside the population) is
  // ignored whole: an attacker controls it, and the affinity of honest rows must not depend on it.
  void add_affinity(int64_t client, std::span<const float> pairs) {
    if (pairs.empty() || pairs.size() % 2 != 0) return;
    std::vector<int64_t> ids;
    std::vector<double> raw;
    for (size_t k = 0; k < pairs.size(); k += 2) {
      const float id = pairs[k];
      if (!(id >= 0 && id < static_cast<float>(N_)) || id != std::floor(id)) return;
      ids.push_back(static_cast<int64_t>(id));
      raw.push_back(pairs[k + 1]);
    }
    const std::vector<double> add = fomo_affinity_increments(raw, options_.normalised_affinity);
    for (size_t k = 0; k < ids.size(); ++k)
      affinity_[static_cast<size_t>(client * N_ + ids[k])] += static_cast<float>(add[k]);
  }

  void store_model(int64_t client, const MethodRound& round, int64_t r) {
    BASTION_CHECK(static_cast<int64_t>(round.global.size()) == round.width,
                  "fedfomo: the server needs the global state (", round.width,
                  " values) to recover the uploaded models, got ", round.global.size());
    BASTION_CHECK(width_ == 0 || width_ == round.width, "fedfomo: uploads of ", round.width, " values, earlier ",
                  width_);
    width_ = round.width;
    std::vector<float>& model = models_[client];
    model.resize(static_cast<size_t>(width_));
    const float* upload = round.uploads + r * round.width;
    for (int64_t j = 0; j < width_; ++j) model[j] = round.global[j] + upload[j];
  }
};

}  // namespace

std::unique_ptr<MethodServer> make_fomo_server(int64_t clients, const FomoServerOptions& options) {
  BASTION_CHECK(clients > 0, "fedfomo: ", clients, " clients");
  return std::make_unique<FomoServer>(clients, options);
}

}  // namespace bastion
