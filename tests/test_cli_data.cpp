// `bastion data stats|show` end to end on the generated `synthetic` set (no files needed): the CSV adds
// up to the partition, the PNG holds the sample with its trigger, and bad options fail with a message.
#include <gtest/gtest.h>
#include <stb_image.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "tests/test_support.h"

using namespace bastion::testing;

namespace {

using CliData = TempDirTest;

std::vector<std::vector<long>> read_csv_rows(const fs::path& path, std::string& header) {
  std::ifstream in(path);
  std::getline(in, header);
  std::vector<std::vector<long>> rows;
  for (std::string line; std::getline(in, line);) {
    std::vector<long> row;
    std::stringstream fields(line);
    for (std::string field; std::getline(fields, field, ',');) row.push_back(std::stol(field));
    rows.push_back(row);
  }
  return rows;
}

}  // namespace

TEST_F(CliData, StatsCsvAddsUpToThePartition) {
  const fs::path csv = dir_ / "stats.csv";
  const RunResult r = run_bastion(
      "data stats --dataset synthetic --partition pathological:2 --clients 10 --seed 3 --out " + csv.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("partition pathological:2, 10 clients, seed 3"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("min 200, median 200.0, max 200"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("classes per client: mean 2.00"), std::string::npos) << r.output;
  std::string header;
  const auto rows = read_csv_rows(csv, header);
  EXPECT_EQ(header,
            "client,size,test_size,class_0,class_1,class_2,class_3,class_4,class_5,class_6,class_7,class_8,class_9");
  ASSERT_EQ(rows.size(), 10u);
  long total = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    ASSERT_EQ(rows[i].size(), 13u);
    EXPECT_EQ(rows[i][0], static_cast<long>(i));
    const long classes_sum = std::accumulate(rows[i].begin() + 3, rows[i].end(), 0L);
    EXPECT_EQ(classes_sum, rows[i][1]) << "client " << i;  // the histogram covers the client exactly
    EXPECT_EQ(std::count_if(rows[i].begin() + 3, rows[i].end(), [](long c) { return c > 0; }), 2);
    total += rows[i][1];
  }
  EXPECT_EQ(total, 2000);
  EXPECT_FALSE(fs::exists(csv.string() + ".tmp"));
}

TEST_F(CliData, StatsIsDeterministicForASeed) {
  const std::string args =
      "data stats --dataset synthetic --partition dirichlet:0.3 --clients 20 --min-size 5 --rows -1";
  const RunResult a = run_bastion(args + " --seed 7"), b = run_bastion(args + " --seed 7"),
                  c = run_bastion(args + " --seed 8");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_EQ(a.output, b.output);
  EXPECT_NE(a.output, c.output);
}

TEST_F(CliData, ShowWritesThePngWithTheTrigger) {
  const fs::path png = dir_ / "x.png";
  const RunResult r = run_bastion(
      "data show --dataset synthetic --index 3 --trigger grid --normalization none --scale 1 --out " + png.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("synthetic train[3]: label 3"), std::string::npos) << r.output;
  int w = 0, h = 0, channels = 0;
  unsigned char* pixels = stbi_load(png.c_str(), &w, &h, &channels, 1);
  ASSERT_NE(pixels, nullptr) << stbi_failure_reason();
  ASSERT_EQ(w, 8);
  ASSERT_EQ(h, 8);
  // FederatedScope's grid (data/triggers.h) in the bottom-right 3×3 corner: 1 -> 255, 0 -> 0.
  const int grid[3][3] = {{0, 0, 1}, {0, 1, 0}, {1, 0, 1}};
  for (int r3 = 0; r3 < 3; ++r3)
    for (int c3 = 0; c3 < 3; ++c3)
      EXPECT_EQ(pixels[(5 + r3) * 8 + 5 + c3], grid[r3][c3] * 255) << "row " << 5 + r3 << " col " << 5 + c3;
  stbi_image_free(pixels);
}

TEST_F(CliData, BadOptionsFailWithAMessage) {
  const RunResult unknown_set = run_bastion("data stats --dataset cifar-11");
  EXPECT_EQ(unknown_set.exit_code, 1);
  EXPECT_NE(unknown_set.output.find("unknown dataset 'cifar-11'"), std::string::npos) << unknown_set.output;
  const RunResult bad_partition = run_bastion("data stats --dataset synthetic --partition dirichlet:-1");
  EXPECT_EQ(bad_partition.exit_code, 1);
  EXPECT_NE(bad_partition.output.find("dirichlet"), std::string::npos) << bad_partition.output;
  const RunResult bad_index =
      run_bastion("data show --dataset synthetic --index 2000 --out " + (dir_ / "y.png").string());
  EXPECT_EQ(bad_index.exit_code, 1);
  EXPECT_NE(bad_index.output.find("--index 2000 is outside [0, 2000)"), std::string::npos) << bad_index.output;
  const RunResult bad_trigger =
      run_bastion("data show --dataset synthetic --trigger star --out " + (dir_ / "z.png").string());
  EXPECT_EQ(bad_trigger.exit_code, 1);
  EXPECT_NE(bad_trigger.output.find("unknown trigger 'star'"), std::string::npos) << bad_trigger.output;
  EXPECT_FALSE(fs::exists(dir_ / "y.png"));
}
