// spread_round: what the round loop sends between ranks when one experiment's clients are spread over K
// processes (fl/core/mpi_run.h; docs/scale-out.md "One experiment over several processes"), packed into
// byte blobs. Client c is owned by rank c mod K: it trains there, and its ClientState lives there.
// Per round (m sampled clients, D values per model, W = D_shared uploaded columns):
//   down, before training (only for a server rule with per-client start states, or a method server):
//        each owner receives its clients' start rows (D floats each) and method messages;
//   up, after training: each owner sends its clients' upload rows (W floats each) and ClientResults;
//        rank 0 places them at the clients' positions in the sampled list, so the server sees exactly
//        the single-process round;
//   down, after aggregation: the new global state (D floats) to every rank.
// At checkpoints the owners send rank 0 their clients' states, so the one checkpoint file holds every
// client and can be resumed with any K. Every blob is read back with bounds checks (a short or long
// blob is an internal error: the ranks disagree about the round).
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "fl/clients/client_rule.h"
#include "fl/core/mpi_run.h"

namespace bastion {

inline int owner_of(int64_t client, int ranks) { return static_cast<int>(client % ranks); }

// The positions i in `sampled` whose client `rank` owns, ascending (all of them for one rank).
std::vector<int64_t> owned_rows(const std::vector<int64_t>& sampled, int rank, int ranks);

class ByteWriter {
 public:
  template <typename T>
  void put(const T& value) {
    const char* p = reinterpret_cast<const char*>(&value);
    bytes_.insert(bytes_.end(), p, p + sizeof(T));
  }
  void put_floats(std::span<const float> values);  // count, then the values
  void put_string(const std::string& text);
  Bytes take() { return std::move(bytes_); }

 private:
  Bytes bytes_;
};

class ByteReader {
 public:
  explicit ByteReader(const Bytes& bytes) : bytes_(bytes) {}
  template <typename T>
  T get() {
    T value;
    std::memcpy(&value, take(sizeof(T)), sizeof(T));
    return value;
  }
  std::vector<float> get_floats();
  void get_floats_into(std::span<float> out);  // the count must equal out.size()
  std::string get_string();
  bool done() const { return at_ == bytes_.size(); }

 private:
  const char* take(size_t n);
  const Bytes& bytes_;
  size_t at_ = 0;
};

// Down, before training. `starts`: (m, D) rows or empty; `messages`: m entries or empty.
std::vector<Bytes> pack_client_inputs(const std::vector<int64_t>& sampled, int ranks, std::span<const float> starts,
                                      int64_t D, const std::vector<ClientMessage>& messages);
// On an owner: fills the rows it owns of `starts` (resized to m × D when start rows came) and `messages`
// (resized to m when messages came).
void unpack_client_inputs(const Bytes& bytes, const std::vector<int64_t>& rows, int64_t m, int64_t D,
                          std::vector<float>& starts, std::vector<ClientMessage>& messages);

// Up, after training: the owner's rows of `uploads` ((m, W)) and `results`.
Bytes pack_client_outputs(const std::vector<int64_t>& rows, std::span<const float> uploads, int64_t W,
                          const std::vector<ClientResult>& results);
// On rank 0: every rank's part (gather order) into the sampled positions.
void unpack_client_outputs(const std::vector<Bytes>& parts, int64_t W, std::vector<float>& uploads,
                           std::vector<ClientResult>& results);

// Checkpoints: the non-empty states of the clients `rank` owns; on rank 0 written into `states`.
Bytes pack_client_states(const std::vector<ClientState>& states, int rank, int ranks);
void unpack_client_states(const std::vector<Bytes>& parts, std::vector<ClientState>& states);

}  // namespace bastion
