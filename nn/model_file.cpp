#include "nn/model_file.h"

#include "tensor/error.h"
#include "tensor/safetensors.h"

namespace bastion {

void save_model_file(const Model& model, const std::string& path, std::map<std::string, std::string> metadata) {
  SafetensorsFile file;
  file.metadata = std::move(metadata);
  file.metadata["model"] = model.name();
  file.metadata["num_classes"] = std::to_string(model.num_classes());
  for (const ParameterView& p : model.parameters()) file.f32.emplace_back(p.name, p.value);
  for (const ParameterView& b : model.buffers()) file.f32.emplace_back(b.name, b.value);
  for (const auto& [name, counter] : model.counters()) file.i64.push_back({name, {Shape{}, {*counter}}});
  save_safetensors(path, file);
}

void load_model_file(Model& model, const std::string& path) {
  const SafetensorsFile file = load_safetensors(path);
  const auto named = file.metadata.find("model");
  BASTION_CHECK(named == file.metadata.end() || named->second == model.name(), path, " holds a '", named->second,
                "' model, not '", model.name(), "'");
  std::map<std::string, Tensor> values(file.f32.begin(), file.f32.end());
  for (const auto& [name, counter] : model.counters()) {
    bool found = false;
    for (const auto& [stored_name, stored] : file.i64) {
      if (stored_name != name) continue;
      BASTION_CHECK(stored.second.size() == 1, path, ": '", name, "' holds ", stored.second.size(),
                    " values, expected 1");
      *counter = stored.second[0];
      found = true;
    }
    BASTION_CHECK(found, path, ": no value for '", name, "'");
  }
  BASTION_CHECK(file.i64.size() == model.counters().size(), path, " holds ", file.i64.size(),
                " integer tensors, model '", model.name(), "' has ", model.counters().size());
  try {
    model.load_state(values);
  } catch (const Error& e) {
    BASTION_FAIL(path, ": ", e.what());
  }
}

}  // namespace bastion
