// `bastion data stats|show`: look at a dataset the way the FL lab will use it.
//   stats  partitions a split over clients and prints per-client sizes and class histograms (a compact
//          text heat-map), min/median/max sizes and mean classes per client; --out writes the counts as CSV.
//   show   renders one sample, optionally augmented and with a backdoor trigger, as a PNG, exactly as the
//          model would see it (the normalised input mapped back through mean/std).
//   get    downloads registered sets from their canonical sources with a SHA-256 check (data/download.h).
#include <stb_image_write.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "data/dataset.h"
#include "data/download.h"
#include "data/partition.h"
#include "data/transforms.h"
#include "data/triggers.h"
#include "tensor/file_io.h"
#include "tensor/random.h"

namespace bastion::cli {

namespace {

struct DataArgs {
  std::string dataset = "fmnist", data_dir, split = "train", out;
  // stats
  std::string partition = "dirichlet:0.5";
  int64_t clients = 100, min_size = 10, max_per_client = 0, rows = -1;
  double client_test_fraction = 0.0, server_fraction = 0.0;
  bool no_cap = false, client_prior = false;
  // show
  int64_t index = 0, scale = 0;
  std::string trigger, normalization = "dataset";
  bool augment = false;
  uint64_t seed = 1;
  // get
  std::vector<std::string> names;
  std::string mirror;
  int retries = 2;
  bool quiet = false;
};

// The split a command works on: train, test, or pooled (train then test, FedFSA's setting).
Dataset select_split(const DataArgs& args) {
  DatasetSplit split = load_dataset(args.dataset, args.data_dir);
  if (args.split == "train") return std::move(split.train);
  if (args.split == "test") {
    BASTION_CHECK(split.test.size() > 0, "dataset '", args.dataset, "' has no test split (use --split train)");
    return std::move(split.test);
  }
  if (split.test.size() == 0) return std::move(split.train);
  return concat_datasets(split.train, split.test);
}

// ---- stats ----

PartitionSpec stats_spec(const DataArgs& args) {
  PartitionSpec spec = parse_partition(args.partition);
  spec.min_size = args.min_size;
  spec.dirichlet_cap = !args.no_cap;
  spec.dirichlet_client_prior = args.client_prior;
  spec.max_per_client = args.max_per_client;
  spec.client_test_fraction = args.client_test_fraction;
  spec.server_fraction = args.server_fraction;
  return spec;
}

// One character per class: the share of the client's samples in that class, in ten steps from ' ' (none)
// to '@' (all). Plain ASCII so it survives any terminal, log file and copy-paste.
std::string heat_row(const std::vector<int64_t>& counts, int64_t total) {
  static constexpr char kRamp[] = " .:-=+*#%@";
  std::string row;
  for (int64_t count : counts) {
    if (count == 0 || total == 0) {
      row += kRamp[0];
      continue;
    }
    const double share = static_cast<double>(count) / static_cast<double>(total);
    const int level = std::clamp(1 + static_cast<int>(share * 9.0), 1, 9);
    row += kRamp[level];
  }
  return row;
}

void write_stats_csv(const std::string& path, const Partition& partition,
                     const std::vector<std::vector<int64_t>>& histogram) {
  std::ostringstream csv;
  csv << "client,size,test_size";
  const size_t classes = histogram.empty() ? 0 : histogram[0].size();
  for (size_t c = 0; c < classes; ++c) csv << ",class_" << c;
  csv << "\n";
  for (int64_t i = 0; i < partition.num_clients(); ++i) {
    csv << i << "," << partition.train[i].size() << "," << partition.test[i].size();
    for (int64_t count : histogram[i]) csv << "," << count;
    csv << "\n";
  }
  write_file_atomic(path, csv.str());  // an interrupted run never leaves half a file
}

int run_stats(const DataArgs& args) {
  const Dataset data = select_split(args);
  const PartitionSpec spec = stats_spec(args);
  const Partition partition = make_partition(data, spec, args.clients, args.seed);
  const auto histogram = class_histogram(data, partition.train);
  const PartitionStats stats = partition_stats(histogram);

  std::printf("dataset %s (%s split, %lld samples, %lld classes), partition %s, %lld clients, seed %llu\n",
              data.name.c_str(), args.split.c_str(), static_cast<long long>(data.size()),
              static_cast<long long>(data.num_classes), partition_name(spec).c_str(),
              static_cast<long long>(partition.num_clients()), static_cast<unsigned long long>(args.seed));
  std::printf("client sizes: min %lld, median %.1f, max %lld, total %lld; classes per client: mean %.2f\n",
              static_cast<long long>(stats.min_size), stats.median_size, static_cast<long long>(stats.max_size),
              static_cast<long long>(stats.total), stats.mean_classes);
  if (!partition.server.empty()) std::printf("server holds %zu samples\n", partition.server.size());
  std::printf("heat-map: one column per class 0..%lld, share of the client's samples ' '=0 .:-=+*#%%@ =all\n",
              static_cast<long long>(data.num_classes - 1));
  std::printf("%6s %6s %5s %4s  %s\n", "client", "size", "test", "cls", "classes");
  const int64_t shown = args.rows < 0 ? partition.num_clients() : std::min(args.rows, partition.num_clients());
  for (int64_t i = 0; i < shown; ++i) {
    const auto& counts = histogram[i];
    const int64_t present = std::count_if(counts.begin(), counts.end(), [](int64_t c) { return c > 0; });
    std::printf("%6lld %6zu %5zu %4lld  |%s|\n", static_cast<long long>(i), partition.train[i].size(),
                partition.test[i].size(), static_cast<long long>(present),
                heat_row(counts, static_cast<int64_t>(partition.train[i].size())).c_str());
  }
  if (shown < partition.num_clients())
    std::printf("... %lld more clients (--rows -1 shows all)\n",
                static_cast<long long>(partition.num_clients() - shown));
  if (!args.out.empty()) {
    write_stats_csv(args.out, partition, histogram);
    std::printf("wrote %s\n", args.out.c_str());
  }
  return 0;
}

// ---- show ----

// Maps the model's normalised input back to 8-bit pixels (x * std + mean, clamped to [0, 1]). Float sets
// (WISDM) have no pixel scale, so each of their channels is min-max stretched instead.
std::vector<uint8_t> to_display_pixels(const std::vector<float>& chw, const SampleShape& shape,
                                       const std::vector<float>& mean, const std::vector<float>& std, bool float_set) {
  const int64_t plane = shape.height * shape.width;
  std::vector<uint8_t> out(chw.size());
  for (int64_t c = 0; c < shape.channels; ++c) {
    const float* in = chw.data() + c * plane;
    float lo = 0.0f, hi = 1.0f;
    if (float_set) {
      lo = *std::min_element(in, in + plane);
      hi = std::max(*std::max_element(in, in + plane), lo + 1e-6f);
    }
    const float m = float_set ? 0.0f : mean[c % mean.size()], s = float_set ? 1.0f : std[c % std.size()];
    for (int64_t i = 0; i < plane; ++i) {
      const float v = std::clamp((in[i] * s + m - lo) / (hi - lo), 0.0f, 1.0f);
      out[c * plane + i] = static_cast<uint8_t>(v * 255.0f + 0.5f);
    }
  }
  return out;
}

// Planar (C, H, W) to interleaved RGB or gray, each pixel blown up to scale×scale.
std::vector<uint8_t> interleave_scaled(const std::vector<uint8_t>& chw, const SampleShape& shape, int64_t scale) {
  const int64_t channels = shape.channels == 3 ? 3 : 1;  // other channel counts: show channel 0
  const int64_t out_h = shape.height * scale, out_w = shape.width * scale;
  std::vector<uint8_t> out(static_cast<size_t>(out_h * out_w * channels));
  for (int64_t y = 0; y < out_h; ++y)
    for (int64_t x = 0; x < out_w; ++x)
      for (int64_t c = 0; c < channels; ++c)
        out[(y * out_w + x) * channels + c] = chw[(c * shape.height + y / scale) * shape.width + x / scale];
  return out;
}

int run_show(DataArgs args) {
  Dataset data = select_split(args);
  apply_normalization_preset(data, args.normalization);
  BASTION_CHECK(0 <= args.index && args.index < data.size(), "--index ", args.index, " is outside [0, ", data.size(),
                ") of the ", args.split, " split of '", data.name, "'");
  TransformSpec spec;
  if (args.augment) spec = default_train_transform(data.name);
  const SampleShape shape = transformed_shape(data, spec);
  std::unique_ptr<Trigger> trigger;
  if (!args.trigger.empty()) {
    // Raw triggers act before resize, normalised ones after: resolve each against the size it meets.
    const SampleShape at = trigger_stage_shape(data, spec, trigger_space(args.trigger));
    trigger = std::make_unique<Trigger>(make_trigger(args.trigger, at.channels, at.height, at.width));
  }
  std::vector<float> chw(static_cast<size_t>(shape.numel()));
  Generator rng = Generator(args.seed).fork(static_cast<uint64_t>(args.index));
  transform_sample_into(chw.data(), data, args.index, spec, trigger.get(), rng);

  const int64_t scale = args.scale > 0 ? args.scale : std::max<int64_t>(1, 256 / std::max(shape.height, shape.width));
  const std::vector<uint8_t> image =
      interleave_scaled(to_display_pixels(chw, shape, data.mean, data.std, data.is_float()), shape, scale);
  const int channels = shape.channels == 3 ? 3 : 1;
  const int w = static_cast<int>(shape.width * scale), h = static_cast<int>(shape.height * scale);
  const std::string out = args.out.empty() ? data.name + "-" + std::to_string(args.index) + ".png" : args.out;
  std::string png;
  auto append = [](void* context, void* data, int size) {
    static_cast<std::string*>(context)->append(static_cast<const char*>(data), static_cast<size_t>(size));
  };
  BASTION_CHECK(stbi_write_png_to_func(append, &png, w, h, channels, image.data(), w * channels) != 0,
                "cannot encode the PNG for '", out, "'");
  write_file_atomic(out, png);
  const int32_t label = data.labels[args.index];
  const std::string class_name =
      label < static_cast<int32_t>(data.class_names.size()) ? " (" + data.class_names[label] + ")" : "";
  std::printf("%s %s[%lld]: label %d%s, %lldx%lldx%lld%s%s -> %s (%dx%d)\n", data.name.c_str(), args.split.c_str(),
              static_cast<long long>(args.index), label, class_name.c_str(), static_cast<long long>(shape.channels),
              static_cast<long long>(shape.height), static_cast<long long>(shape.width),
              args.augment ? ", augmented" : "", trigger ? (", trigger " + trigger->name).c_str() : "", out.c_str(), w,
              h);
  return 0;
}

// ---- get ----

int64_t source_bytes(const DatasetSource& source) {
  int64_t bytes = 0;
  for (const RemoteFile& file : source.files) bytes += file.bytes;
  return bytes;
}

int run_get(const DataArgs& args) {
  const std::string root = args.data_dir.empty() ? default_download_root() : args.data_dir;
  if (args.names.empty()) {  // what it can get, and where it would go
    std::printf("bastion data get NAME... downloads into %s/<folder> (--data-dir DIR for another root):\n",
                root.c_str());
    for (const std::string& name : downloadable_dataset_names()) {
      const DatasetSource& source = dataset_source(name);
      std::printf("  %-9s %6.1f MB  %s/\n", name.c_str(), static_cast<double>(source_bytes(source)) / 1e6,
                  source.folder.c_str());
    }
    return 0;
  }
  for (const std::string& name : args.names) dataset_source(name);  // every name checked before any download
  DownloadOptions options;
  options.mirror = args.mirror;
  options.retries = args.retries;
  options.progress = !args.quiet && isatty(fileno(stderr)) != 0;
  if (!args.quiet)
    options.log = [](const std::string& line) {
      std::printf("%s\n", line.c_str());
      std::fflush(stdout);
    };
  for (const std::string& name : args.names) {
    const DatasetSource& source = dataset_source(name);
    if (!args.quiet)
      std::printf("%s: %.1f MB into %s/%s\n", name.c_str(), static_cast<double>(source_bytes(source)) / 1e6,
                  root.c_str(), source.folder.c_str());
    const std::string folder = download_dataset(source, root, options);
    find_dataset_dir(name, root);  // the loaders find what was written, or this says where they looked
    std::printf("%s: ready in %s (%s)\n", name.c_str(), folder.c_str(), source.citation.c_str());
  }
  return 0;
}

void add_common_options(CLI::App* sub, DataArgs& args) {
  sub->add_option("--dataset", args.dataset, "Dataset name (bastion list datasets)")->capture_default_str();
  sub->add_option("--data-dir", args.data_dir,
                  "Folder with the dataset files (else $BASTION_DATA, ./data, /usr/share/datasets)");
  sub->add_option("--split", args.split, "train, test, or pooled (train then test)")
      ->check(CLI::IsMember({"train", "test", "pooled"}))
      ->capture_default_str();
  sub->add_option("--seed", args.seed, "Seed")->capture_default_str();
}

}  // namespace

Command add_data_command(CLI::App& app) {
  auto* data = app.add_subcommand("data", "Datasets: download them, partition statistics, sample images");
  data->require_subcommand(1);
  auto args = std::make_shared<DataArgs>();

  auto* stats = data->add_subcommand("stats", "Per-client sizes and class histograms of a partition");
  add_common_options(stats, *args);
  stats->add_option("--partition", args->partition, "iid | dirichlet:BETA | pathological:S | emnist-groups | natural")
      ->capture_default_str();
  stats->add_option("--clients", args->clients, "Number of clients (natural: 0 = one per group)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24))
      ->capture_default_str();
  stats->add_option("--min-size", args->min_size, "Dirichlet: redraw until every client has this many")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30))
      ->capture_default_str();
  stats->add_flag("--no-cap", args->no_cap, "Dirichlet: turn off the NIID-Bench capping rule");
  stats->add_flag("--client-prior", args->client_prior, "Dirichlet: FedFSA's per-client class prior, equal sizes");
  stats->add_option("--max-per-client", args->max_per_client, "Cap on samples per client (0 = none)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  stats
      ->add_option("--client-test-fraction", args->client_test_fraction,
                   "Share of each client moved to its local test split")
      ->check(CLI::Range(0.0, 0.99));
  stats->add_option("--server-fraction", args->server_fraction, "Hold out this last share of the split for the server")
      ->check(CLI::Range(0.0, 0.99));
  stats->add_option("--rows", args->rows, "Clients to print (-1 = all)")->capture_default_str();
  stats->add_option("--out", args->out, "Also write per-client counts as CSV");

  auto* show = data->add_subcommand("show", "Write one sample (with augmentation/trigger) as a PNG");
  add_common_options(show, *args);
  show->add_option("--index", args->index, "Sample index in the split")->capture_default_str();
  show->add_option("--trigger", args->trigger,
                   "Backdoor trigger to paint (spmc, fedcpa, bapfl, dba, dba:K, square, grid)");
  show->add_flag("--augment", args->augment, "Apply the dataset's default training augmentation (seeded by --seed)");
  show->add_option("--normalization", args->normalization, "Normalisation preset: dataset, mnist, imagenet, half, none")
      ->capture_default_str();
  show->add_option("--scale", args->scale, "Pixel blow-up factor (0 = to about 256 px)")->check(CLI::Range(0, 64));
  show->add_option("--out", args->out, "PNG file to write (default DATASET-INDEX.png)");

  auto* get = data->add_subcommand("get", "Download datasets from their canonical sources, SHA-256 checked, resumable");
  get->add_option("names", args->names, "Datasets to get (none: list what can be downloaded)");
  get->add_option("--data-dir", args->data_dir, "Root folder to put them in (default $BASTION_DATA, else ./data)");
  get->add_option("--mirror", args->mirror, "Fetch each file from MIRROR/<file name> instead of its canonical URL");
  get->add_option("--retries", args->retries, "Resumed attempts after an interrupted transfer")
      ->check(CLI::Range(0, 100))
      ->capture_default_str();
  get->add_flag("--quiet", args->quiet, "Print only the final line per dataset");

  return [args, stats, show, get]() {
    if (stats->parsed()) return run_stats(*args);
    if (show->parsed()) return run_show(*args);
    if (get->parsed()) return run_get(*args);
    return 1;
  };
}

}  // namespace bastion::cli
