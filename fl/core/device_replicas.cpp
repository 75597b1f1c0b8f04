#include "fl/core/device_replicas.h"

#include "fl/clients/client_rule.h"
#include "fl/core/mpi_grid.h"
#include "fl/core/run_setup.h"
#include "kernels/cuda/cuda.h"
#include "nn/models.h"
#include "tensor/error.h"

namespace bastion {

namespace {
// BatchNorm's num_batches_tracked lives in the modules, not in the flat state: copied beside it.
void copy_counters(const Model& from, const Model& to) {
  const auto source = from.counters(), target = to.counters();
  BASTION_ASSERT(source.size() == target.size());
  for (size_t i = 0; i < source.size(); ++i) *target[i].second = *source[i].second;
}
}  // namespace

DeviceReplicas::DeviceReplicas(const std::vector<std::unique_ptr<Model>>& host) {
  for (const std::unique_ptr<Model>& replica : host) {
    std::unique_ptr<Model> twin = make_model(replica->name(), replica->input_shape(), replica->num_classes(), 0);
    twin->to(Device::CUDA);
    twins_.push_back(std::move(twin));
    upload(static_cast<int>(twins_.size()) - 1, *replica);
  }
}

Model& DeviceReplicas::model(int worker, Model& host) const {
  return active() ? *twins_[static_cast<size_t>(worker)] : host;
}

Model& DeviceReplicas::upload(int worker, Model& host) const {
  Model& twin = model(worker, host);
  if (&twin == &host) return host;
  twin.load_state_values(host.flat_state());
  copy_counters(host, twin);
  return twin;
}

void DeviceReplicas::download(int worker, Model& host) const {
  if (!active()) return;
  const Model& twin = *twins_[static_cast<size_t>(worker)];
  host.state_tensor().copy_from(twin.state_tensor());
  copy_counters(twin, host);
}

Device select_run_device(const ExperimentConfig& config, const std::string& override_name) {
  const std::string name = override_name.empty() ? config.run.text("device") : override_name;
  BASTION_CHECK(name == "cpu" || name == "cuda", "--device ", name, ": valid: cpu, cuda");
  if (name == "cpu") return Device::CPU;
  BASTION_CHECK(cuda_available(), "run.device = \"cuda\": ", cuda_device_description());
  cuda_select_device(launcher_local_rank());  // before the first allocation: one GPU per rank of a node
  return Device::CUDA;
}

void check_device_support(const ExperimentConfig& config, const ClientRule& rule) {
  BASTION_CHECK(
      rule.traits().on_device, "run.device = \"cuda\": client rule '", config.clients.text("rule"),
      "' trains on the CPU only (it reads the model's weights on the host); docs/cuda.md lists the rules that ",
      "train on the device");
}

}  // namespace bastion
