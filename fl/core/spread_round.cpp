// spread_round: the packing of what ranks exchange in a round (the layout is in spread_round.h). Blobs
// name their rows (sampled positions) or clients, so a part may be empty (rank 0's own, which it keeps
// in place) and the order of rows inside a part does not matter.
#include "fl/core/spread_round.h"

#include "tensor/error.h"

namespace bastion {

std::vector<int64_t> owned_rows(const std::vector<int64_t>& sampled, int rank, int ranks) {
  std::vector<int64_t> rows;
  for (size_t i = 0; i < sampled.size(); ++i)
    if (owner_of(sampled[i], ranks) == rank) rows.push_back(static_cast<int64_t>(i));
  return rows;
}

void ByteWriter::put_floats(std::span<const float> values) {
  put<uint64_t>(values.size());
  const char* p = reinterpret_cast<const char*>(values.data());
  bytes_.insert(bytes_.end(), p, p + values.size() * sizeof(float));
}

void ByteWriter::put_string(const std::string& text) {
  put<uint64_t>(text.size());
  bytes_.insert(bytes_.end(), text.begin(), text.end());
}

const char* ByteReader::take(size_t n) {
  BASTION_CHECK(n <= bytes_.size() - at_, "MPI message ends early (", bytes_.size(), " bytes, reading ", n, " at ", at_,
                "): the ranks disagree about the round");
  const char* p = bytes_.data() + at_;
  at_ += n;
  return p;
}

std::vector<float> ByteReader::get_floats() {
  std::vector<float> values(get<uint64_t>());
  get_floats_into(values);  // the count is read: the values follow
  return values;
}

void ByteReader::get_floats_into(std::span<float> out) {
  if (out.empty()) return;
  std::memcpy(out.data(), take(out.size() * sizeof(float)), out.size() * sizeof(float));
}

std::string ByteReader::get_string() {
  const uint64_t n = get<uint64_t>();
  const char* p = take(n);
  return std::string(p, n);
}

namespace {

void put_map(ByteWriter& out, const std::map<std::string, std::vector<float>>& vectors) {
  out.put<uint64_t>(vectors.size());
  for (const auto& [name, values] : vectors) {
    out.put_string(name);
    out.put_floats(values);
  }
}

void get_map(ByteReader& in, std::map<std::string, std::vector<float>>& vectors) {
  vectors.clear();
  for (uint64_t n = in.get<uint64_t>(); n > 0; --n) {
    std::string name = in.get_string();
    vectors[name] = in.get_floats();
  }
}

// A row of floats as written by put_floats, checked against the expected width.
void get_row(ByteReader& in, std::span<float> out) {
  BASTION_CHECK(in.get<uint64_t>() == out.size(), "MPI message holds a row of another width: the ranks disagree");
  in.get_floats_into(out);
}

}  // namespace

std::vector<Bytes> pack_client_inputs(const std::vector<int64_t>& sampled, int ranks, std::span<const float> starts,
                                      int64_t D, const std::vector<ClientMessage>& messages) {
  std::vector<ByteWriter> writers(static_cast<size_t>(ranks));
  for (size_t i = 1; i < writers.size(); ++i) {
    writers[i].put<uint8_t>(!starts.empty());
    writers[i].put<uint8_t>(!messages.empty());
  }
  for (size_t i = 0; i < sampled.size(); ++i) {
    const int owner = owner_of(sampled[i], ranks);
    if (owner == 0) continue;  // rank 0 keeps its rows in place
    ByteWriter& out = writers[static_cast<size_t>(owner)];
    out.put<int64_t>(static_cast<int64_t>(i));
    if (!starts.empty()) out.put_floats(starts.subspan(i * static_cast<size_t>(D), static_cast<size_t>(D)));
    if (!messages.empty()) put_map(out, messages[i]);
  }
  std::vector<Bytes> parts;
  for (ByteWriter& w : writers) parts.push_back(w.take());
  return parts;
}

void unpack_client_inputs(const Bytes& bytes, const std::vector<int64_t>& rows, int64_t m, int64_t D,
                          std::vector<float>& starts, std::vector<ClientMessage>& messages) {
  ByteReader in(bytes);
  const bool has_starts = in.get<uint8_t>() != 0, has_messages = in.get<uint8_t>() != 0;
  starts.clear();
  messages.clear();
  if (has_starts) starts.assign(static_cast<size_t>(m * D), 0.0f);
  if (has_messages) messages.resize(static_cast<size_t>(m));
  for (size_t k = 0; k < rows.size(); ++k) {
    const int64_t i = in.get<int64_t>();
    BASTION_CHECK(i == rows[k], "MPI message for row ", i, ", expected row ", rows[k], ": the ranks disagree");
    if (has_starts) get_row(in, std::span<float>(starts.data() + i * D, static_cast<size_t>(D)));
    if (has_messages) get_map(in, messages[static_cast<size_t>(i)]);
  }
  BASTION_CHECK(in.done(), "MPI message longer than the rows this rank owns: the ranks disagree");
}

Bytes pack_client_outputs(const std::vector<int64_t>& rows, std::span<const float> uploads, int64_t W,
                          const std::vector<ClientResult>& results) {
  ByteWriter out;
  for (int64_t i : rows) {
    out.put<int64_t>(i);
    out.put_floats(uploads.subspan(static_cast<size_t>(i * W), static_cast<size_t>(W)));
    const ClientResult& r = results[static_cast<size_t>(i)];
    out.put<double>(r.train_loss);
    for (int64_t count : {r.steps, r.samples, r.head_steps, r.body_steps, r.personal_steps}) out.put<int64_t>(count);
    out.put_floats(r.extra_upload);
    out.put_string(r.note);
  }
  return out.take();
}

void unpack_client_outputs(const std::vector<Bytes>& parts, int64_t W, std::vector<float>& uploads,
                           std::vector<ClientResult>& results) {
  const int64_t m = static_cast<int64_t>(results.size());
  for (const Bytes& part : parts) {
    ByteReader in(part);
    while (!in.done()) {
      const int64_t i = in.get<int64_t>();
      BASTION_CHECK(i >= 0 && i < m, "MPI message names row ", i, " of ", m, ": the ranks disagree");
      get_row(in, std::span<float>(uploads.data() + i * W, static_cast<size_t>(W)));
      ClientResult& r = results[static_cast<size_t>(i)];
      r.train_loss = in.get<double>();
      for (int64_t* count : {&r.steps, &r.samples, &r.head_steps, &r.body_steps, &r.personal_steps})
        *count = in.get<int64_t>();
      r.extra_upload = in.get_floats();
      r.note = in.get_string();
    }
  }
}

Bytes pack_client_states(const std::vector<ClientState>& states, int rank, int ranks) {
  ByteWriter out;
  if (rank == 0) return out.take();
  for (size_t c = 0; c < states.size(); ++c) {
    const ClientState& state = states[c];
    if (owner_of(static_cast<int64_t>(c), ranks) != rank || (state.vectors.empty() && state.scalars.empty())) continue;
    out.put<int64_t>(static_cast<int64_t>(c));
    put_map(out, state.vectors);
    out.put<uint64_t>(state.scalars.size());
    for (const auto& [name, value] : state.scalars) {
      out.put_string(name);
      out.put<double>(value);
    }
  }
  return out.take();
}

void unpack_client_states(const std::vector<Bytes>& parts, std::vector<ClientState>& states) {
  for (const Bytes& part : parts) {
    ByteReader in(part);
    while (!in.done()) {
      const int64_t c = in.get<int64_t>();
      BASTION_CHECK(c >= 0 && c < static_cast<int64_t>(states.size()), "MPI message names client ", c,
                    ": the ranks disagree");
      ClientState& state = states[static_cast<size_t>(c)];
      get_map(in, state.vectors);
      state.scalars.clear();
      for (uint64_t n = in.get<uint64_t>(); n > 0; --n) {
        std::string name = in.get_string();
        state.scalars[name] = in.get<double>();
      }
    }
  }
}

}  // namespace bastion
