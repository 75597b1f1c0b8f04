#include "fl/core/server_side.h"

#include <algorithm>
#include <cmath>

#include "fl/evaluate.h"
#include "fl/registry.h"
#include "tensor/error.h"

namespace bastion {

int64_t expected_malicious_count(const ExperimentConfig& c, int64_t uploads) {
  const double share = c.server.real("expected_malicious");
  if (share >= 0) return static_cast<int64_t>(std::floor(share * static_cast<double>(uploads) + 1e-9));
  const int64_t forced = c.attack.integer("malicious_per_round");
  if (forced > 0) return std::min(forced, uploads);
  const double ratio =
      static_cast<double>(resolved_malicious_count(c)) / static_cast<double>(c.data.integer("clients"));
  return static_cast<int64_t>(std::floor(ratio * static_cast<double>(uploads) + 1e-9));
}

std::vector<int64_t> compact_finite_uploads(float* uploads, int64_t D, const std::vector<int64_t>& sampled,
                                            int64_t round, bool fail) {
  std::vector<int64_t> accepted;
  for (size_t i = 0; i < sampled.size(); ++i) {
    const float* row = uploads + static_cast<int64_t>(i) * D;
    const bool finite = std::all_of(row, row + D, [](float v) { return std::isfinite(v); });
    BASTION_CHECK(finite || !fail, "round ", round, ": client ", sampled[i],
                  " uploaded NaN or Inf (server.on_invalid = fail)");
    if (!finite) continue;
    float* slot = uploads + static_cast<int64_t>(accepted.size()) * D;
    if (slot != row) std::copy(row, row + D, slot);
    accepted.push_back(sampled[i]);
  }
  return accepted;
}

void add_update_checked(const SharedColumns& sharing, std::span<const float> update, std::span<float> global,
                        const std::string& rule, int64_t round) {
  BASTION_CHECK(static_cast<int64_t>(update.size()) == sharing.width, "server rule '", rule, "' returned ",
                update.size(), " values for ", sharing.width, " shared columns");
  size_t k = 0;
  for (const ColumnRange& r : sharing.ranges)
    for (int64_t d = r.begin; d < r.end; ++d, ++k)
      BASTION_CHECK(std::isfinite(update[k]) && std::isfinite(global[d] + update[k]), "round ", round,
                    ": server rule '", rule, "' gives a non-finite global model (column ", d, ": ", global[d], " + ",
                    update[k], "); the run stops before the model is changed");
  sharing.add_into(update, global);
}

namespace {

bool selects(const std::string& entry, const ParameterView& view, bool is_buffer) {
  if (entry == "all") return true;
  if (entry == "body") return is_buffer || !view.is_head;
  if (entry == "head") return !is_buffer && view.is_head;
  return view.name.rfind(entry, 0) == 0;
}

}  // namespace

std::vector<ColumnRange> apply_to_columns(const Model& model, const std::vector<std::string>& apply_to) {
  std::vector<ColumnRange> ranges;
  if (apply_to.empty()) return ranges;
  std::vector<uint8_t> used(apply_to.size(), 0);
  auto visit = [&](const std::vector<ParameterView>& views, bool is_buffer) {
    for (const ParameterView& view : views) {
      bool take = false;
      for (size_t k = 0; k < apply_to.size(); ++k) {
        if (!selects(apply_to[k], view, is_buffer)) continue;
        take = true;
        used[k] = 1;
      }
      if (!take) continue;
      if (!ranges.empty() && ranges.back().end == view.begin)
        ranges.back().end = view.end;
      else
        ranges.push_back({view.begin, view.end});
    }
  };
  visit(model.parameters(), false);
  visit(model.buffers(), true);
  for (size_t k = 0; k < apply_to.size(); ++k) {
    if (used[k]) continue;
    std::string names;
    for (const ParameterView& view : model.parameters()) names += (names.empty() ? "" : ", ") + view.name;
    BASTION_FAIL("server.apply_to: '", apply_to[k], "' selects nothing in model ", model.name(),
                 " (use all, body, head or a prefix of: ", names, ")");
  }
  return ranges;
}

std::vector<ColumnRange> weight_columns(const Model& model, const SharedColumns& shared) {
  std::vector<ColumnRange> full;
  for (const ParameterView& view : model.parameters()) {
    const int dims = view.value.shape().rank();
    if (dims != 2 && dims != 4) continue;
    if (!full.empty() && full.back().end == view.begin)
      full.back().end = view.end;
    else
      full.push_back({view.begin, view.end});
  }
  return ranges_within_shared(full, shared);
}

std::unique_ptr<ServerRule> build_server_rule(const ExperimentConfig& c, const Model& model,
                                              const SharedColumns& shared) {
  std::unique_ptr<ServerRule> rule =
      make_server_rule(c.server.text("rule"), c.server_rule, c.server.text("inner"), c.server_inner_rule);
  const std::vector<ColumnRange> full = apply_to_columns(model, c.server.list("apply_to"));
  if (full.empty()) return rule;
  std::vector<ColumnRange> ranges = ranges_within_shared(full, shared);
  BASTION_CHECK(!ranges.empty() || shared.width == 0, "server.apply_to selects only columns that clients.rule = '",
                c.clients.text("rule"), "' keeps on the clients (nothing of it is uploaded)");
  const bool everything = ranges.size() == 1 && ranges[0].begin == 0 && ranges[0].end == shared.width;
  if (ranges.empty() || everything) return rule;
  return make_column_subset(std::move(rule), std::move(ranges), c.server.text("rest") == "mean");
}

std::optional<LocalSchedule> client_local_schedule(const Params& client_rule) {
  for (const ParamSpec& spec : local_schedule_params())
    if (client_rule.values().count(spec.name) == 0) return std::nullopt;
  // A rule that counts its local work in its own keys (fedrep's head and body epochs) may set epochs = 0;
  // that is no schedule to copy, and must not fail runs that never ask for one.
  if (client_rule.integer("epochs") <= 0 && client_rule.integer("steps") <= 0) return std::nullopt;
  return local_schedule(client_rule);
}

ServerTrainSpec server_spec_of(const LocalSchedule& schedule, int64_t round) {
  ServerTrainSpec spec;
  spec.epochs = schedule.epochs;
  spec.steps = schedule.steps;
  spec.batch = schedule.batch;
  spec.lr = schedule.lr_at(round);
  spec.momentum = schedule.sgd.momentum;
  spec.weight_decay = schedule.sgd.weight_decay;
  spec.nesterov = schedule.sgd.nesterov;
  spec.grad_clip = schedule.grad_clip;
  spec.drop_last = schedule.drop_last;
  return spec;
}

ModelServerData::ModelServerData(Model& model, const Dataset& data, const std::vector<int64_t>& indices,
                                 const TransformSpec& train_transform, const TransformSpec& eval_transform,
                                 int64_t eval_batch, std::optional<LocalSchedule> clients)
    : model_(model), data_(data), indices_(indices), train_transform_(train_transform), eval_transform_(eval_transform),
      eval_batch_(eval_batch), clients_(std::move(clients)) {}

std::optional<ServerTrainSpec> ModelServerData::client_schedule(int64_t round) const {
  if (!clients_) return std::nullopt;
  return server_spec_of(*clients_, round);
}

std::vector<float> ModelServerData::train(std::span<const float> state, const ServerTrainSpec& spec) {
  BASTION_CHECK(!indices_.empty(), "the server has no data of its own: set data.server_fraction");
  BASTION_CHECK(static_cast<int64_t>(state.size()) == static_cast<int64_t>(model_.flat_state().size()),
                "server training: state of ", state.size(), " values for a model of ", model_.flat_state().size());
  std::copy(state.begin(), state.end(), model_.flat_state().begin());
  const Params params("server.training", sgd_client_params(),
                      {{"epochs", spec.epochs},
                       {"steps", spec.steps},
                       {"batch", spec.batch},
                       {"lr", spec.lr},
                       {"momentum", spec.momentum},
                       {"weight_decay", spec.weight_decay},
                       {"nesterov", spec.nesterov},
                       {"grad_clip", spec.grad_clip},
                       {"drop_last", spec.drop_last},
                       {"rho", spec.rho}});
  ClientState scratch;
  ClientTask task{model_, data_, indices_, train_transform_, scratch, -1, 0, spec.seed, spec.seed};
  last_train_steps_ = make_sgd_client(params)->train(task).steps;
  const std::span<const float> trained = model_.flat_state();
  return {trained.begin(), trained.end()};
}

ServerEval ModelServerData::evaluate(std::span<const float> state) {
  BASTION_CHECK(!indices_.empty(), "the server has no data of its own: set data.server_fraction");
  std::copy(state.begin(), state.end(), model_.flat_state().begin());
  const TransformSpec* transform = is_identity_transform(eval_transform_) ? nullptr : &eval_transform_;
  const EvalResult result = bastion::evaluate(model_, data_, eval_batch_, indices_, transform);
  return {result.loss, result.entropy, result.samples};
}

}  // namespace bastion
