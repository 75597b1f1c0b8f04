// Checkpoint of one seed of a federated run: everything the next round depends on, so a resumed run
// continues bit for bit (the random streams need no saving: they are derived from (seed, round,
// client) afresh). One safetensors file, written atomically (tensor/safetensors.h):
//   F32 "global"                 the global model's flat state (parameters then buffers)
//   "server_state.<block>"       the server rule's memory, one entry per non-empty block of its RuleState
//                                (fl/base/rule_state.h): F32 for float32 blocks, I64 for int64 blocks and for
//                                the bit patterns of float64 blocks; metadata "server_state_version" (the
//                                codec's version) and "server_state_blocks" (every block as name:f32|i64|f64,
//                                empty ones included). Checkpoints written before the codec hold one F32
//                                "server_state" vector, which loads as the legacy block.
//   "method_state.<block>"       the method server's memory (fl/clients/method_server.h), the same way
//   F32 "client.<id>.<name>"     each client's persistent vectors (ClientState::vectors)
//   I64 "client_flags"           (clients): the server rule's latest verdict per client, 0 or 1
//                                (per-client detection, metrics.h; absent in older files = none flagged)
//   I64 "timing"                 (rounds, 6): round, train_s, aggregate_s, eval_s, round_s, cpu_s, each
//                                the bit pattern of the double (exact: summary.json's seconds_per_round
//                                comes back to the last digit; files with the older (rounds, 5) table,
//                                cpu_s then unmeasured, or the older F32 "timing" still load)
//   metadata: format, round (last completed), seed, config (the resolved TOML), rounds_csv (the rows
//   so far), pending_csv (counters since the last evaluated round), and one "client.<id>.<name>" entry
//   per client scalar (printed with 17 significant digits: exact for a double).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fl/base/rule_state.h"
#include "fl/clients/client_rule.h"
#include "fl/metrics/results.h"
#include "tensor/safetensors.h"

namespace bastion {

struct CheckpointState {
  int64_t round = 0;
  uint64_t seed = 0;
  std::string config_toml;
  std::vector<float> global;
  RuleState server_state{"server_state"}, method_state{"method_state"};
  std::vector<ClientState> clients;
  std::vector<uint8_t> client_flags;  // one per client, or empty (none flagged)
  std::vector<RoundRecord> records;
  RoundRecord pending;
  std::vector<RoundTiming> timings;
};

void save_checkpoint(const std::string& path, const CheckpointState& state);
// Throws bastion::Error naming the file when it is missing, not a Bastion checkpoint, or inconsistent.
CheckpointState load_checkpoint(const std::string& path);

// The two halves of save/load without the file (the fuzz target's entry points): the safetensors
// contents of a checkpoint, and the checks and decoding of loaded contents (`path` names them in errors).
SafetensorsFile checkpoint_file(const CheckpointState& state);
CheckpointState parse_checkpoint(const SafetensorsFile& file, const std::string& path);

}  // namespace bastion
