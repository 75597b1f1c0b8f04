// DeviceReplicas: the CUDA twins of a run's models (run.device = "cuda", `bastion run --device cuda`).
// The run loop keeps every model as host values (the global state, ClientState, and the host replicas
// through which rules and personalised evaluation assemble a client's model) and trains and evaluates on
// the twin of the worker's host replica: the host state goes up before (one copy of D floats) and the
// trained state comes back after (one copy). Server rules and attacks on uploads keep their math on the
// host's [n, D] matrices. A CPU run has no twins and model() is the host replica itself, so the CPU path
// is the one it always was.
// Determinism: the CUDA kernels reduce in a fixed order (no atomics), so one GPU model gives the same
// rounds.csv on every run; CPU and CUDA agree within the float roundings of their different sum orders
// (docs/cuda.md "Federated runs on the device").
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "fl/core/config.h"
#include "nn/model.h"

namespace bastion {

class ClientRule;

class DeviceReplicas {
 public:
  DeviceReplicas() = default;  // a CPU run
  // One CUDA twin of each host replica (same architecture, same initial state).
  explicit DeviceReplicas(const std::vector<std::unique_ptr<Model>>& host);
  bool active() const { return !twins_.empty(); }
  // The model a worker trains and evaluates: its twin, or `host` itself on a CPU run.
  Model& model(int worker, Model& host) const;
  // Copies `host`'s state (and BatchNorm counters) to the worker's twin and returns model(worker, host).
  Model& upload(int worker, Model& host) const;
  // Copies the twin's state (and counters) back into `host`; nothing on a CPU run.
  void download(int worker, Model& host) const;

 private:
  std::vector<std::unique_ptr<Model>> twins_;
};

// run.device, or `override` when set ("cpu" | "cuda"): Device::CUDA after checking, with a one-line error,
// that a device is there.
Device select_run_device(const ExperimentConfig& config, const std::string& override_name);
// A one-line error when the client rule does not train on the device (ClientTraits::on_device). Every
// attack does: data and upload attacks act on the host, and bapfl's Training step moves its head noise
// through host copies.
void check_device_support(const ExperimentConfig& config, const ClientRule& rule);

}  // namespace bastion
