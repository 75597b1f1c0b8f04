// Federated partitions. The contract is data/partition.h; docs/partitions.md has each rule, the paper
// that uses it and where we differ from the authors' code.
#include "data/partition.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numeric>

#include "data/partition_internal.h"
#include "data/sampling.h"
#include "tensor/random.h"

namespace bastion {
namespace {

using partition_detail::floor_fraction;
using partition_detail::hold_out_per_group;
using partition_detail::Lists;
using partition_detail::split_natural;

// One forked stream per purpose: turning on an option (e.g. client_test_fraction) never changes the
// split itself, and each dirichlet attempt is reproducible on its own.
enum Stream : uint64_t {
  kStreamIid = 1,
  kStreamDirichlet,
  kStreamClientPrior,
  kStreamPathological,
  kStreamEmnistGroups,
  kStreamMaxPerClient,
  kStreamClientTest,
};

constexpr const char* kValidForms =
    "valid forms: iid, dirichlet:BETA (BETA > 0, e.g. dirichlet:0.5), pathological:S (integer S >= 1, "
    "e.g. pathological:2), emnist-groups, natural";

// FedCAP's EMNIST split: share of each client's samples taken from its dominant group (SPEC §2).
constexpr double kEmnistDominantShare = 0.8;

int64_t smallest_size(const Lists& lists) {
  int64_t smallest = INT64_MAX;
  for (const auto& list : lists) smallest = std::min<int64_t>(smallest, static_cast<int64_t>(list.size()));
  return smallest;
}

// Indices 0..pool-1 grouped by label, each group in ascending order.
Lists indices_by_class(const Dataset& data, int64_t pool) {
  BASTION_CHECK(data.num_classes > 0, "partition: dataset '", data.name, "' declares no classes");
  Lists by_class(static_cast<size_t>(data.num_classes));
  for (int64_t i = 0; i < pool; ++i) {
    const int32_t label = data.labels[static_cast<size_t>(i)];
    BASTION_CHECK(label >= 0 && label < data.num_classes, "partition: sample ", i, " of '", data.name, "' has label ",
                  label, " outside [0, ", data.num_classes, ")");
    by_class[static_cast<size_t>(label)].push_back(i);
  }
  return by_class;
}

void check_spec(const PartitionSpec& spec) {
  const std::string name = partition_name(spec);
  BASTION_CHECK(spec.kind != PartitionKind::kDirichlet || (spec.beta > 0.0 && std::isfinite(spec.beta)), name,
                ": beta must be finite and > 0, got ", spec.beta);
  BASTION_CHECK(spec.kind != PartitionKind::kPathological || spec.shards >= 1, name,
                ": classes per client S must be >= 1, got ", spec.shards);
  BASTION_CHECK(spec.min_size >= 0, name, ": min_size must be >= 0, got ", spec.min_size);
  BASTION_CHECK(spec.max_attempts >= 1, name, ": max_attempts must be >= 1, got ", spec.max_attempts);
  BASTION_CHECK(spec.max_per_client >= 0, name, ": max_per_client must be >= 0 (0 = no cap), got ",
                spec.max_per_client);
  BASTION_CHECK(spec.client_test_fraction >= 0.0 && spec.client_test_fraction < 1.0, name,
                ": client_test_fraction must be in [0, 1), got ", spec.client_test_fraction);
  BASTION_CHECK(spec.server_fraction >= 0.0 && spec.server_fraction < 1.0, name,
                ": server_fraction must be in [0, 1), got ", spec.server_fraction);
}

// ---------------------------------------------------------------- iid

Lists split_iid(int64_t pool, int64_t n, uint64_t seed) {
  Generator rng = Generator(seed).fork(kStreamIid);
  std::vector<int64_t> order(static_cast<size_t>(pool));
  std::iota(order.begin(), order.end(), int64_t{0});
  shuffle_indices(order, rng);
  Lists lists(static_cast<size_t>(n));
  auto start = order.begin();
  for (int64_t j = 0; j < n; ++j) {
    const int64_t len = pool / n + (j < pool % n ? 1 : 0);  // the first pool % n clients get one more
    lists[static_cast<size_t>(j)].assign(start, start + len);
    start += len;
  }
  return lists;
}

// ---------------------------------------------------------------- dirichlet, class mode (NIID-Bench)

// One whole draw of NIID-Bench's partition_data (FedCPA utils.py; SPMC partition_label_skew_loaders),
// class by class in label order, since the capping rule depends on what earlier classes handed out.
Lists dirichlet_class_draw(const Lists& by_class, int64_t pool, int64_t n, const PartitionSpec& spec, Generator& rng) {
  Lists lists(static_cast<size_t>(n));
  const double cap = static_cast<double>(pool) / static_cast<double>(n);  // numpy: len(idx_j) < N / n
  std::vector<double> log_p(static_cast<size_t>(n));
  std::vector<bool> keep(static_cast<size_t>(n));
  for (const auto& class_list : by_class) {
    std::vector<int64_t> idx = class_list;
    shuffle_indices(idx, rng);
    for (double& w : log_p) w = sample_gamma_log(rng, spec.beta);
    for (size_t j = 0; j < keep.size(); ++j)
      keep[j] = !spec.dirichlet_cap || static_cast<double>(lists[j].size()) < cap;
    // While this class has samples, fewer than `pool` are handed out, so some client is under the cap
    // and p is a proper distribution.
    const std::vector<double> p = normalize_log_weights(log_p, keep);
    const auto len = static_cast<int64_t>(idx.size());
    double cumsum = 0.0;
    int64_t start = 0;
    for (int64_t j = 0; j < n; ++j) {
      cumsum += p[static_cast<size_t>(j)];
      // numpy: (np.cumsum(p) * len).astype(int)[:-1]; the last client takes the tail.
      int64_t end = j + 1 == n ? len : static_cast<int64_t>(cumsum * static_cast<double>(len));
      end = std::clamp(end, start, len);
      auto& list = lists[static_cast<size_t>(j)];
      list.insert(list.end(), idx.begin() + start, idx.begin() + end);
      start = end;
    }
  }
  return lists;
}

Lists split_dirichlet_classes(const Dataset& data, int64_t pool, int64_t n, const PartitionSpec& spec, uint64_t seed) {
  const std::string advice = "; use a larger beta, a smaller min_size or fewer clients";
  BASTION_CHECK(spec.min_size * n <= pool, partition_name(spec), ": ", n,
                " clients with at least min_size = ", spec.min_size, " samples need ", spec.min_size * n,
                " samples, only ", pool, " are split", advice);
  const Lists by_class = indices_by_class(data, pool);
  const Generator base = Generator(seed).fork(kStreamDirichlet);
  int64_t smallest = 0;
  for (int64_t attempt = 0; attempt < spec.max_attempts; ++attempt) {
    Generator rng = base.fork(static_cast<uint64_t>(attempt));
    Lists lists = dirichlet_class_draw(by_class, pool, n, spec, rng);
    smallest = smallest_size(lists);
    if (smallest >= spec.min_size) return lists;
  }
  BASTION_FAIL(partition_name(spec), ": none of ", spec.max_attempts, " draws gave all ", n,
               " clients at least min_size = ", spec.min_size, " of ", pool,
               " samples (smallest client in the last draw: ", smallest, ")", advice);
}

// ---------------------------------------------------------------- dirichlet, client-prior mode (FedFSA)

// A class from `prior` restricted to the classes with samples left (by_class[k] past next[k]). When the
// prior has no mass left there (all of it sat on exhausted classes, or underflowed for a tiny beta), the
// class of a uniformly random unused sample is drawn instead, so every client still fills its quota.
int64_t draw_available_class(const std::vector<double>& prior, const Lists& by_class, const std::vector<int64_t>& next,
                             Generator& rng) {
  const size_t classes = by_class.size();
  auto left = [&](size_t k) { return static_cast<double>(by_class[k].size()) - static_cast<double>(next[k]); };
  double mass = 0.0, unused = 0.0;
  for (size_t k = 0; k < classes; ++k) {
    if (left(k) <= 0) continue;
    mass += prior[k];
    unused += left(k);
  }
  const bool fallback = !(mass > 0.0);
  double u = rng.uniform() * (fallback ? unused : mass);
  int64_t last = -1;
  for (size_t k = 0; k < classes; ++k) {
    if (left(k) <= 0) continue;
    const double w = fallback ? left(k) : prior[k];
    if (w <= 0.0) continue;
    last = static_cast<int64_t>(k);
    if (u < w) return last;
    u -= w;
  }
  BASTION_ASSERT(last >= 0);
  return last;  // rounding left u at the very top: the last class with weight
}

Lists split_dirichlet_client_prior(const Dataset& data, int64_t pool, int64_t n, const PartitionSpec& spec,
                                   uint64_t seed) {
  Generator rng = Generator(seed).fork(kStreamClientPrior);
  Lists by_class = indices_by_class(data, pool);
  for (auto& list : by_class) shuffle_indices(list, rng);
  std::vector<std::vector<double>> prior(static_cast<size_t>(n));
  for (auto& p : prior) p = sample_dirichlet(rng, spec.beta, data.num_classes);
  const auto quota = static_cast<size_t>(pool / n);
  std::vector<int64_t> next(by_class.size(), 0);
  std::vector<int64_t> active(static_cast<size_t>(n));  // clients with quota left
  std::iota(active.begin(), active.end(), int64_t{0});
  Lists lists(static_cast<size_t>(n));
  // Each step hands out one unused sample and quota·n <= pool, so some class always has samples left.
  while (!active.empty()) {
    const auto slot = static_cast<size_t>(rng.below(active.size()));
    auto& list = lists[static_cast<size_t>(active[slot])];
    const auto k =
        static_cast<size_t>(draw_available_class(prior[static_cast<size_t>(active[slot])], by_class, next, rng));
    list.push_back(by_class[k][static_cast<size_t>(next[k]++)]);
    if (list.size() == quota) {
      active[slot] = active.back();
      active.pop_back();
    }
  }
  return lists;
}

// ---------------------------------------------------------------- pathological

// Shards class k can give at a shard size: floor(count_k / shard), and at most n (one per client).
int64_t shard_supply(const Lists& by_class, int64_t shard, int64_t n) {
  int64_t supply = 0;
  for (const auto& list : by_class) supply += std::min<int64_t>(static_cast<int64_t>(list.size()) / shard, n);
  return supply;
}

// floor(pool / (n·S)) when the classes can supply n·S shards of that size, which is always the case for
// class-balanced sets (Fashion-MNIST, CIFAR, TinyImageNet with the papers' client counts). Otherwise the
// rounding down of every class (or a class with more than n shards) leaves too few shards, and rather
// than refuse, the shard shrinks to the largest size that works (binary search: supply only falls as
// the shard grows). Throws when even one-sample shards are too few.
int64_t pathological_shard_size(const Lists& by_class, int64_t pool, int64_t n, const PartitionSpec& spec) {
  const int64_t need = n * spec.shards;
  const int64_t largest = pool / need;
  BASTION_CHECK(largest >= 1, partition_name(spec), ": ", pool, " samples cannot give ", n, " clients ", spec.shards,
                " shards of at least one sample each");
  BASTION_CHECK(shard_supply(by_class, 1, n) >= need, partition_name(spec), ": ", n, " clients x ", spec.shards,
                " distinct classes need ", need, " shards, but the classes supply only ", shard_supply(by_class, 1, n),
                " even with one-sample shards (at most one per client and class); use a smaller S or fewer clients");
  int64_t low = 1, high = largest;  // supply(low) >= need; find the largest such size
  while (low < high) {
    const int64_t mid = low + (high - low + 1) / 2;
    if (shard_supply(by_class, mid, n) >= need)
      low = mid;
    else
      high = mid - 1;
  }
  return low;
}

// How many shards each class gives (t_k <= min(count_k / shard, n)), summing to n·S. Spread as evenly
// as the capacities allow, dealing one shard per class in a seeded class order, so no class is drained
// while another still has many shards.
std::vector<int64_t> choose_shard_counts(const Lists& by_class, int64_t shard, int64_t n, const PartitionSpec& spec,
                                         Generator& rng) {
  std::vector<int64_t> capacity(by_class.size());
  for (size_t k = 0; k < by_class.size(); ++k)
    capacity[k] = std::min<int64_t>(static_cast<int64_t>(by_class[k].size()) / shard, n);
  std::vector<int64_t> order(by_class.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  shuffle_indices(order, rng);
  std::vector<int64_t> counts(by_class.size(), 0);
  for (int64_t left = n * spec.shards; left > 0;) {  // each pass gives at least one shard: supply >= need
    for (int64_t k : order) {
      const auto c = static_cast<size_t>(k);
      if (left > 0 && counts[c] < capacity[c]) ++counts[c], --left;
    }
  }
  return counts;
}

// The S distinct classes of the next client. Invariant before each client: sum(remaining) =
// clients_left·S and remaining[k] <= clients_left for every k. It guarantees the rest can be dealt (lay
// the shards out class after class and give position p to client p mod clients_left: a run of at most
// clients_left positions hits distinct clients). To keep it, a class with remaining[k] == clients_left
// must go to this client (at most S classes can be that full); the other places are drawn without
// replacement with probability proportional to the remaining shards, like drawing shards from a bag but
// never the same class twice. So the assignment never fails once the shard counts add up.
std::vector<size_t> draw_client_classes(const std::vector<int64_t>& remaining, int64_t clients_left, int64_t s,
                                        Generator& rng) {
  std::vector<size_t> chosen;
  std::vector<bool> taken(remaining.size(), false);
  for (size_t k = 0; k < remaining.size(); ++k) {
    if (remaining[k] == clients_left) chosen.push_back(k), taken[k] = true;
  }
  while (static_cast<int64_t>(chosen.size()) < s) {
    uint64_t total = 0;
    for (size_t k = 0; k < remaining.size(); ++k) total += taken[k] ? 0 : static_cast<uint64_t>(remaining[k]);
    BASTION_ASSERT(total > 0);
    uint64_t u = rng.below(total);
    size_t k = 0;
    for (;; ++k) {
      const uint64_t weight = taken[k] ? 0 : static_cast<uint64_t>(remaining[k]);
      if (u < weight) break;
      u -= weight;
    }
    chosen.push_back(k);
    taken[k] = true;
  }
  return chosen;
}

Lists split_pathological(const Dataset& data, int64_t pool, int64_t n, const PartitionSpec& spec, uint64_t seed) {
  const int64_t s = spec.shards;
  BASTION_CHECK(s <= data.num_classes, partition_name(spec), ": each client needs ", s, " distinct classes but '",
                data.name, "' has ", data.num_classes);
  Generator rng = Generator(seed).fork(kStreamPathological);
  Lists by_class = indices_by_class(data, pool);
  const int64_t shard = pathological_shard_size(by_class, pool, n, spec);
  for (auto& list : by_class) shuffle_indices(list, rng);
  std::vector<int64_t> remaining = choose_shard_counts(by_class, shard, n, spec, rng);
  std::vector<int64_t> dealt(by_class.size(), 0);  // shards of class k handed out: its shuffled list in order
  Lists lists(static_cast<size_t>(n));
  for (int64_t client = 0; client < n; ++client) {
    auto& list = lists[static_cast<size_t>(client)];
    for (size_t k : draw_client_classes(remaining, n - client, s, rng)) {
      const auto first = by_class[k].begin() + dealt[k]++ * shard;
      list.insert(list.end(), first, first + shard);
      --remaining[k];
    }
  }
  return lists;
}

// ---------------------------------------------------------------- emnist-groups (FedCAP)

size_t emnist_group(int32_t label) { return label < 10 ? 0 : label < 36 ? 1 : 2; }

// The largest equal client size <= pool / n for which every group holds its clients' dominant shares.
int64_t emnist_client_size(const Lists& by_group, int64_t pool, int64_t n) {
  int64_t size = pool / n;
  for (size_t g = 0; g < 3; ++g) {
    const auto clients = static_cast<int64_t>((n - static_cast<int64_t>(g) + 2) / 3);  // i with i % 3 == g
    const auto have = static_cast<int64_t>(by_group[g].size());
    if (clients == 0) continue;
    const double upper = static_cast<double>(have) / static_cast<double>(clients) / kEmnistDominantShare;
    size = std::min<int64_t>(size, static_cast<int64_t>(upper) + 1);  // then step down past the rounding
    while (size > 0 && clients * std::llround(kEmnistDominantShare * static_cast<double>(size)) > have) --size;
  }
  return size;
}

Lists split_emnist_groups(const Dataset& data, int64_t pool, int64_t n, const PartitionSpec& spec, uint64_t seed) {
  BASTION_CHECK(data.num_classes == 62, partition_name(spec), " needs EMNIST's 62 classes (digits 0-9, upper ",
                "10-35, lower 36-61), '", data.name, "' has ", data.num_classes);
  Generator rng = Generator(seed).fork(kStreamEmnistGroups);
  Lists by_group(3);
  for (int64_t i = 0; i < pool; ++i) by_group[emnist_group(data.labels[static_cast<size_t>(i)])].push_back(i);
  for (auto& list : by_group) shuffle_indices(list, rng);
  const int64_t size = emnist_client_size(by_group, pool, n);
  BASTION_CHECK(size >= 1, partition_name(spec), ": the groups (", by_group[0].size(), " digits, ", by_group[1].size(),
                " upper, ", by_group[2].size(), " lower) cannot give ", n,
                " clients 80 % of their samples from their group");
  const int64_t dominant = std::llround(kEmnistDominantShare * static_cast<double>(size));
  Lists lists(static_cast<size_t>(n));
  std::vector<bool> used(static_cast<size_t>(pool), false);
  std::vector<int64_t> next(3, 0);
  for (int64_t client = 0; client < n; ++client) {
    const size_t g = static_cast<size_t>(client % 3);
    for (int64_t t = 0; t < dominant; ++t) {
      const int64_t index = by_group[g][static_cast<size_t>(next[g]++)];
      lists[static_cast<size_t>(client)].push_back(index);
      used[static_cast<size_t>(index)] = true;
    }
  }
  // The other 20 %: every still unused sample (all classes) in one shuffled order, dealt client by client.
  std::vector<int64_t> rest;
  for (int64_t i = 0; i < pool; ++i)
    if (!used[static_cast<size_t>(i)]) rest.push_back(i);
  shuffle_indices(rest, rng);
  auto from = rest.begin();
  for (auto& list : lists) {
    list.insert(list.end(), from, from + (size - dominant));
    from += size - dominant;
  }
  return lists;
}

// ---------------------------------------------------------------- options after the split

void apply_max_per_client(Lists& lists, int64_t cap, uint64_t seed) {
  if (cap == 0) return;
  const Generator base = Generator(seed).fork(kStreamMaxPerClient);
  for (size_t j = 0; j < lists.size(); ++j) {
    if (static_cast<int64_t>(lists[j].size()) <= cap) continue;
    Generator rng = base.fork(j);
    std::sort(lists[j].begin(), lists[j].end());  // the subset must not depend on the split's dealing order
    shuffle_indices(lists[j], rng);
    lists[j].resize(static_cast<size_t>(cap));
  }
}

Lists split_client_test(Lists& train, double fraction, uint64_t seed) {
  Lists test(train.size());
  if (fraction == 0.0) return test;
  const Generator base = Generator(seed).fork(kStreamClientTest);
  for (size_t j = 0; j < train.size(); ++j) {
    const int64_t count = floor_fraction(fraction, static_cast<int64_t>(train[j].size()));
    Generator rng = base.fork(j);
    std::sort(train[j].begin(), train[j].end());
    shuffle_indices(train[j], rng);
    test[j].assign(train[j].end() - count, train[j].end());
    train[j].resize(train[j].size() - static_cast<size_t>(count));
  }
  return test;
}

}  // namespace

// ---------------------------------------------------------------- public

PartitionSpec parse_partition(const std::string& text) {
  const size_t colon = text.find(':');
  const std::string kind = text.substr(0, colon);
  const bool has_param = colon != std::string::npos;
  const std::string param = has_param ? text.substr(colon + 1) : "";
  const char* first = param.data();
  const char* last = param.data() + param.size();
  PartitionSpec spec;
  if (kind == "iid" || kind == "emnist-groups" || kind == "natural") {
    BASTION_CHECK(!has_param, "partition '", text, "': ", kind, " takes no parameter; ", kValidForms);
    spec.kind = kind == "iid"       ? PartitionKind::kIid
                : kind == "natural" ? PartitionKind::kNatural
                                    : PartitionKind::kEmnistGroups;
  } else if (kind == "dirichlet") {
    spec.kind = PartitionKind::kDirichlet;
    const auto [end, ec] = std::from_chars(first, last, spec.beta);
    BASTION_CHECK(has_param && !param.empty() && ec == std::errc() && end == last, "partition '", text,
                  "': dirichlet needs a number BETA after the colon, got '", param, "'; ", kValidForms);
    BASTION_CHECK(spec.beta > 0.0 && std::isfinite(spec.beta), "partition '", text,
                  "': BETA must be finite and > 0, got '", param, "'; ", kValidForms);
  } else if (kind == "pathological") {
    spec.kind = PartitionKind::kPathological;
    const auto [end, ec] = std::from_chars(first, last, spec.shards);
    BASTION_CHECK(has_param && !param.empty() && ec == std::errc() && end == last, "partition '", text,
                  "': pathological needs an integer S after the colon, got '", param, "'; ", kValidForms);
    BASTION_CHECK(spec.shards >= 1, "partition '", text, "': S must be >= 1, got '", param, "'; ", kValidForms);
  } else {
    BASTION_FAIL("unknown partition '", text, "'; ", kValidForms);
  }
  return spec;
}

std::string partition_name(const PartitionSpec& spec) {
  switch (spec.kind) {
    case PartitionKind::kIid:
      return "iid";
    case PartitionKind::kEmnistGroups:
      return "emnist-groups";
    case PartitionKind::kNatural:
      return "natural";
    case PartitionKind::kPathological:
      return "pathological:" + std::to_string(spec.shards);
    case PartitionKind::kDirichlet: {
      char buffer[32];
      const auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), spec.beta);  // shortest round trip
      BASTION_ASSERT(ec == std::errc());
      return "dirichlet:" + std::string(buffer, end);
    }
  }
  BASTION_FAIL("partition_name: unknown PartitionKind ", static_cast<int>(spec.kind));
}

Partition make_partition(const Dataset& data, const PartitionSpec& spec, int64_t clients, uint64_t seed) {
  check_spec(spec);
  const bool natural = spec.kind == PartitionKind::kNatural;
  BASTION_CHECK(!natural || !data.groups.empty(), partition_name(spec), ": '", data.name,
                "' has no group ids (only sets with users, e.g. wisdm, have them)");
  Partition part;
  if (natural) {
    part.server = hold_out_per_group(data, spec.server_fraction);
  } else {
    for (int64_t i = data.size() - floor_fraction(spec.server_fraction, data.size()); i < data.size(); ++i)
      part.server.push_back(i);
  }
  const int64_t held_out = static_cast<int64_t>(part.server.size()), pool = data.size() - held_out;
  BASTION_CHECK((natural && clients == 0) || (clients >= 1 && clients <= pool), partition_name(spec), ": cannot split ",
                pool, " samples of '", data.name, "' over ", clients, " clients (", held_out,
                " held out for the server)");
  switch (spec.kind) {
    case PartitionKind::kIid:
      part.train = split_iid(pool, clients, seed);
      break;
    case PartitionKind::kDirichlet:
      part.train = spec.dirichlet_client_prior ? split_dirichlet_client_prior(data, pool, clients, spec, seed)
                                               : split_dirichlet_classes(data, pool, clients, spec, seed);
      break;
    case PartitionKind::kPathological:
      part.train = split_pathological(data, pool, clients, spec, seed);
      break;
    case PartitionKind::kEmnistGroups:
      part.train = split_emnist_groups(data, pool, clients, spec, seed);
      break;
    case PartitionKind::kNatural:
      part.train = split_natural(data, part.server, clients, spec);
      break;
  }
  apply_max_per_client(part.train, spec.max_per_client, seed);
  part.test = split_client_test(part.train, spec.client_test_fraction, seed);
  for (auto& list : part.train) std::sort(list.begin(), list.end());
  for (auto& list : part.test) std::sort(list.begin(), list.end());
  return part;
}

}  // namespace bastion
