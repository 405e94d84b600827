// Which launcher started the process, from environment tables as mpirun, srun (with and without
// PMIx), mpiexec and an sbatch script set them (issue 22: srun without PMIx, SLURM_NTASKS).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "kernels/mpi_info.hpp"

namespace moeplan::kernels {
namespace test_launcher {
namespace {

Launcher detect(const std::map<std::string, std::string>& vars, bool open_mpi = true) {
  return detect_launcher(
      [&](const char* name) -> const char* {
        const auto it = vars.find(name);
        return it == vars.end() ? nullptr : it->second.c_str();
      },
      open_mpi);
}

TEST(Launcher, NoneOutsideALauncher) {
  const Launcher l = detect({{"HOME", "/root"}});
  EXPECT_EQ(l.name, "");
  EXPECT_EQ(l.tasks, 1);
  EXPECT_FALSE(l.launched());
  EXPECT_TRUE(l.wired);
}

TEST(Launcher, Mpirun) {
  const Launcher l = detect({{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "3"}});
  EXPECT_EQ(l.name, "mpirun");
  EXPECT_EQ(l.tasks, 4);
  EXPECT_EQ(l.rank, 3);
  EXPECT_TRUE(l.launched());
  EXPECT_TRUE(l.wired);
}

TEST(Launcher, MpirunInsideAnSbatchScriptWinsOverSlurm) {
  // sbatch sets SLURM_* for the script; mpirun's processes carry OMPI_COMM_WORLD_* too (and the
  // srun step of mpirun's daemons sets SLURM_STEP_* as well).
  const Launcher l = detect({{"SLURM_NTASKS", "2"},
                             {"SLURM_JOB_ID", "7"},
                             {"SLURM_STEP_ID", "0"},
                             {"SLURM_STEP_NUM_TASKS", "2"},
                             {"OMPI_COMM_WORLD_SIZE", "2"},
                             {"OMPI_COMM_WORLD_RANK", "1"}});
  EXPECT_EQ(l.name, "mpirun");
  EXPECT_EQ(l.tasks, 2);
  EXPECT_EQ(l.rank, 1);
  EXPECT_TRUE(l.wired);
}

TEST(Launcher, SrunWithPmix) {
  const Launcher l = detect({{"SLURM_STEP_ID", "0"},
                             {"SLURM_STEP_NUM_TASKS", "2"},
                             {"SLURM_NTASKS", "2"},
                             {"SLURM_PROCID", "1"},
                             {"SLURM_MPI_TYPE", "pmix"},
                             {"PMIX_RANK", "1"}});
  EXPECT_EQ(l.name, "srun");
  EXPECT_EQ(l.tasks, 2);
  EXPECT_EQ(l.rank, 1);
  EXPECT_TRUE(l.wired);
  EXPECT_TRUE(l.hint.empty());
}

TEST(Launcher, SrunWithoutPmixCannotBeJoinedByOpenMpi) {
  // Slurm's default MpiDefault=none: no PMI variable at all.
  const Launcher none = detect({{"SLURM_STEP_ID", "3"},
                                {"SLURM_STEP_NUM_TASKS", "2"},
                                {"SLURM_PROCID", "0"},
                                {"SLURM_MPI_TYPE", "none"}});
  EXPECT_EQ(none.name, "srun");
  EXPECT_EQ(none.tasks, 2);
  EXPECT_FALSE(none.wired);
  EXPECT_EQ(none.hint,
            "srun started 2 tasks without PMIx (--mpi=none); this Open MPI needs srun --mpi=pmix");
  // --mpi=pmi2: PMI_RANK is set, which Debian's Open MPI cannot use.
  const Launcher pmi2 = detect({{"SLURM_STEP_ID", "0"},
                                {"SLURM_STEP_NUM_TASKS", "4"},
                                {"SLURM_MPI_TYPE", "pmi2"},
                                {"PMI_RANK", "0"},
                                {"PMI_SIZE", "4"}});
  EXPECT_EQ(pmi2.name, "srun");
  EXPECT_FALSE(pmi2.wired);
  EXPECT_NE(pmi2.hint.find("srun started 4 tasks without PMIx (--mpi=pmi2)"), std::string::npos);
  // An MPI that speaks PMI-2 (MPICH) joins them.
  EXPECT_TRUE(detect({{"SLURM_STEP_ID", "0"},
                      {"SLURM_STEP_NUM_TASKS", "4"},
                      {"PMI_RANK", "0"},
                      {"PMI_SIZE", "4"}},
                     false)
                  .wired);
  // A single task needs no wiring (an MPI singleton is the whole world).
  const Launcher one = detect({{"SLURM_STEP_ID", "0"}, {"SLURM_STEP_NUM_TASKS", "1"}});
  EXPECT_FALSE(one.launched());
  EXPECT_TRUE(one.hint.empty());
}

TEST(Launcher, SbatchScriptAloneIsNotALauncher) {
  // moeplan run directly in a batch script of 2 tasks: one process, whatever SLURM_NTASKS says
  // (it used to count as 2 ranks: "layout 2x1: ep·tp = 2 but there are 1 ranks").
  const Launcher l = detect({{"SLURM_NTASKS", "2"},
                             {"SLURM_NPROCS", "2"},
                             {"SLURM_JOB_ID", "12"},
                             {"SLURM_PROCID", "0"},
                             {"SLURM_NODELIST", "node[A-B]"}});
  EXPECT_EQ(l.name, "");
  EXPECT_EQ(l.tasks, 1);
  EXPECT_FALSE(l.launched());
  // The batch step has SLURM_STEP_ID but no SLURM_STEP_NUM_TASKS... or 1 task: still one process.
  EXPECT_FALSE(detect({{"SLURM_NTASKS", "2"}, {"SLURM_STEP_ID", "4294967294"}}).launched());
}

TEST(Launcher, MpiexecOfPmiOrPmix) {
  const Launcher hydra = detect({{"PMI_SIZE", "3"}, {"PMI_RANK", "2"}});
  EXPECT_EQ(hydra.name, "mpiexec");
  EXPECT_EQ(hydra.tasks, 3);
  EXPECT_EQ(hydra.rank, 2);
  const Launcher prrte = detect({{"PMIX_SIZE", "5"}, {"PMIX_RANK", "4"}});
  EXPECT_EQ(prrte.name, "mpiexec");
  EXPECT_EQ(prrte.tasks, 5);
  EXPECT_EQ(prrte.rank, 4);
}

TEST(Launcher, MalformedCountsAreNotALauncher) {
  for (const char* bad : {"", "x", "-2", "0", "2x", "99999999999"}) {
    EXPECT_FALSE(detect({{"OMPI_COMM_WORLD_SIZE", bad}}).launched()) << bad;
    EXPECT_FALSE(detect({{"SLURM_STEP_ID", "0"}, {"SLURM_STEP_NUM_TASKS", bad}}).launched()) << bad;
  }
  EXPECT_EQ(detect({{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "z"}}).rank, 0);
}

TEST(Launcher, ThisProcessAndItsNode) {
  // The test runs outside any launcher.
  EXPECT_GE(launcher_world_size(), 1);
  EXPECT_FALSE(host_name().empty());
  EXPECT_FALSE(node_name().empty());
}

}  // namespace
}  // namespace test_launcher
}  // namespace moeplan::kernels
