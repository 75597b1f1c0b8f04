// write_file_atomic: the file appears whole or not at all, and failures name the path.
#include <gtest/gtest.h>

#include "tensor/file_io.h"
#include "tests/test_support.h"

using namespace bastion;
using namespace bastion::testing;

using FileIoTest = TempDirTest;

TEST_F(FileIoTest, WritesAndReplacesWithoutLeavingTheTemporary) {
  const fs::path file = dir_ / "out.csv";
  write_file_atomic(file.string(), "a,b\n1,2\n");
  EXPECT_EQ(read_raw(file), (Bytes{'a', ',', 'b', '\n', '1', ',', '2', '\n'}));
  write_file_atomic(file.string(), "x");
  EXPECT_EQ(read_raw(file), Bytes{'x'});
  EXPECT_FALSE(fs::exists(file.string() + ".tmp"));
}

TEST_F(FileIoTest, MissingFolderIsAnErrorNamingThePath) {
  const fs::path file = dir_ / "no-such-folder" / "out.csv";
  expect_error([&] { write_file_atomic(file.string(), "x"); }, {"cannot write", "no-such-folder/out.csv.tmp"});
  EXPECT_FALSE(fs::exists(file));
}
