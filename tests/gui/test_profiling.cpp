// The Profiling view and the profile-DB cost source under QT_QPA_PLATFORM=offscreen: a profile
// run from the view and cancelled leaves a valid database that Resume completes; the live table
// holds what the database holds; validate's rows and chart are the library's predictions;
// errors show in the view; a plan with a profile DB as the cost source equals the planner's
// plan with the same database (`moeplan plan --costs FILE`).
#include <gtest/gtest.h>

#include <QBarSeries>
#include <QBarSet>
#include <QChart>
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QSpinBox>
#include <QTableWidget>
#include <QTest>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include "app/gui/charts.hpp"
#include "app/gui/layouts_view.hpp"
#include "app/gui/main_window.hpp"
#include "app/gui/plan_table_model.hpp"
#include "app/gui/profiling_view.hpp"
#include "app/gui/session.hpp"
#include "models/registry.hpp"
#include "planner/costs/cost_setup.hpp"
#include "planner/placement/load_io.hpp"
#include "profiler/environment.hpp"
#include "profiler/pace.hpp"
#include "profiler/validate.hpp"
#include "profiler/validate_attention.hpp"
#include "tests/gui/gui_app.hpp"
#include "tests/gui/tiny_profile.hpp"

namespace moeplan::gui {
namespace test_profiling {
namespace {

namespace fs = std::filesystem;

/// The view's options set to the tiny profile's.
void setTinyOptions(ProfilingView& v, const std::string& out) {
  v.modelCombo()->setEditText(QString::fromLatin1(kTinyModel));
  v.scaleSpin()->setValue(kTinyScale);
  v.ranksSpin()->setValue(kTinyRanks);
  v.quickCheck()->setChecked(true);
  v.maxTokensSpin()->setValue(kTinyMaxTokens);
  v.maxBytesSpin()->setValue(kTinyMaxBytes);
  v.coldMibSpin()->setValue(kTinyColdMib);
  v.maxSecondsSpin()->setValue(0.05);
  v.outputEdit()->setText(QString::fromStdString(out));
}

/// Waits with the event loop running (progress and points arrive as queued events).
void waitUntilIdle(ProfilingView& v) {
  EXPECT_TRUE(QTest::qWaitFor([&] { return !v.busy(); }, 120000));
}

/// Checks the database as the planner reads it: SQLite's integrity check, every point complete
/// (passed, timed, repetitions, run), no identity twice. Returns its points.
std::vector<planner::CostPoint> checkDb(const std::string& path) {
  auto db = planner::CostDb::open(path, false);
  EXPECT_TRUE(db.ok()) << (db.ok() ? "" : db.error().message);
  if (!db.ok()) return {};
  auto ok = (*db)->integrity_ok();
  EXPECT_TRUE(ok.ok() && *ok);
  auto pts = (*db)->points();
  EXPECT_TRUE(pts.ok());
  if (!pts.ok()) return {};
  std::set<std::tuple<std::string, std::string, std::string, int>> ids;
  for (const auto& p : *pts) {
    const std::string what = p.op + " " + p.shape;
    EXPECT_EQ(p.disposition, planner::Disposition::kPassed) << what;
    EXPECT_GT(p.median_s, 0.0) << what;
    EXPECT_LE(p.p10_s, p.median_s) << what;
    EXPECT_LE(p.median_s, p.p90_s) << what;
    EXPECT_GT(p.repetitions, 0) << what;
    EXPECT_GT(p.run_id, 0) << what;
    EXPECT_FALSE(p.measured_at.empty()) << what;
    ids.emplace(p.op, p.dtype, p.shape, p.group_size);
  }
  EXPECT_EQ(ids.size(), pts->size());
  return *pts;
}

/// The view's table holds exactly `points` (in the order they were written, which is not the
/// database's order): one row per point, with its values.
void expectTableHolds(const PointTableModel& m, const std::vector<planner::CostPoint>& points) {
  ASSERT_EQ(m.rowCount(), static_cast<int>(points.size()));
  std::map<std::tuple<std::string, std::string, std::string, int>, const planner::CostPoint*> byId;
  for (const auto& p : points) byId[{p.op, p.dtype, p.shape, p.group_size}] = &p;
  for (int r = 0; r < m.rowCount(); ++r) {
    auto v = [&](int c) { return m.index(r, c).data(PointTableModel::kValueRole); };
    const auto it = byId.find({v(PointTableModel::kOp).toString().toStdString(),
                               v(PointTableModel::kDtype).toString().toStdString(),
                               v(PointTableModel::kShape).toString().toStdString(),
                               v(PointTableModel::kGroup).toInt()});
    ASSERT_NE(it, byId.end()) << "row " << r << " is not in the database";
    const auto& p = *it->second;
    EXPECT_EQ(v(PointTableModel::kMedian).toDouble(), p.median_s);
    EXPECT_EQ(v(PointTableModel::kP10).toDouble(), p.p10_s);
    EXPECT_EQ(v(PointTableModel::kP90).toDouble(), p.p90_s);
    EXPECT_EQ(v(PointTableModel::kReps).toInt(), p.repetitions);
    EXPECT_EQ(v(PointTableModel::kDisposition).toString().toStdString(),
              planner::disposition_name(p.disposition));
    byId.erase(it);  // each point once
  }
}

std::set<std::tuple<std::string, std::string, std::string, int>> identities(
    const std::vector<planner::CostPoint>& points) {
  std::set<std::tuple<std::string, std::string, std::string, int>> ids;
  for (const auto& p : points) ids.emplace(p.op, p.dtype, p.shape, p.group_size);
  return ids;
}

// A point measured again (profile's second look at an unsettled point) replaces its row.
TEST(GuiProfiling, APointMeasuredAgainReplacesItsRow) {
  app();
  PointTableModel m;
  planner::CostPoint p;
  p.device = "cpu:test/ranks=1";
  p.backend = "cpu";
  p.op = "gemm";
  p.dtype = "bf16";
  p.shape = "m=2,n=64,k=32";
  p.median_s = 4e-3;
  m.append(p);
  planner::CostPoint other = p;
  other.shape = "m=4,n=64,k=32";
  m.append(other);
  int changed = 0;
  QObject::connect(&m, &QAbstractItemModel::dataChanged, &m, [&] { ++changed; });
  planner::CostPoint again = p;
  again.median_s = 3e-3;
  m.append(again);
  EXPECT_EQ(m.rowCount(), 2);
  EXPECT_EQ(changed, 1);
  const auto median = [&](int row) {
    return m.index(row, PointTableModel::kMedian).data(PointTableModel::kValueRole).toDouble();
  };
  EXPECT_EQ(median(0), 3e-3);  // the re-measured point, in its own row
  EXPECT_EQ(median(1), 4e-3);  // the other point untouched
}

TEST(GuiProfiling, CancelledProfileLeavesAValidDbThatResumeCompletes) {
  app();
  Session session;
  ProfilingView v(&session);
  const std::string dir = testDir("cancel");
  const std::string db = dir + "/p.db";
  setTinyOptions(v, db);
  // Cancel as soon as the second point has been written.
  int rowsAtCancel = -1;
  QObject::connect(v.pointModel(), &QAbstractItemModel::rowsInserted, &v, [&] {
    if (rowsAtCancel < 0 && v.pointModel()->rowCount() >= 2) {
      rowsAtCancel = v.pointModel()->rowCount();
      EXPECT_TRUE(v.cancelButton()->isEnabled());
      v.cancelButton()->click();
    }
  });
  ASSERT_TRUE(v.startProfile()) << v.errorLabel()->text().toStdString();
  EXPECT_TRUE(v.busy());
  EXPECT_FALSE(v.profileButton()->isEnabled());
  waitUntilIdle(v);
  const auto& first = v.lastOutcome();
  ASSERT_TRUE(first.error.isEmpty()) << first.error.toStdString();
  ASSERT_GE(rowsAtCancel, 2);
  ASSERT_TRUE(first.profile.interrupted);
  const int written =
      first.profile.measured + first.profile.incorrect + first.profile.not_supported;
  EXPECT_GE(written, rowsAtCancel);
  EXPECT_LT(written, first.profile.total);
  EXPECT_TRUE(v.statusLabel()->text().contains(QStringLiteral("cancelled")));
  // The pace before the first point, none at an end the profile did not reach.
  EXPECT_TRUE(first.profile.pace_start.recorded());
  EXPECT_FALSE(first.profile.pace_end.recorded());
  EXPECT_TRUE(v.statusLabel()->text().contains(QStringLiteral("GFLOP/s at the start (bf16 GEMM")))
      << v.statusLabel()->text().toStdString();
  EXPECT_TRUE(v.profileButton()->isEnabled());
  EXPECT_FALSE(v.cancelButton()->isEnabled());
  // The database keeps every completed point, and the table shows exactly them.
  const auto kept = checkDb(db);
  EXPECT_EQ(static_cast<int>(kept.size()), written);
  expectTableHolds(*v.pointModel(), kept);
  // The planner's reader uses it as `plan --costs` does (a local:2 cluster needs the collectives,
  // which a profile cancelled this early has not reached).
  auto setup = planner::make_cost_setup(planner::kDefaultCluster, db);
  ASSERT_TRUE(setup.ok()) << setup.error().message;
  EXPECT_NE(setup->measured, nullptr);

  // Resume measures only what is missing and completes the sweep.
  v.resumeCheck()->setChecked(true);
  ASSERT_TRUE(v.startProfile()) << v.errorLabel()->text().toStdString();
  waitUntilIdle(v);
  const auto& second = v.lastOutcome();
  ASSERT_TRUE(second.error.isEmpty()) << second.error.toStdString();
  EXPECT_FALSE(second.profile.interrupted);
  EXPECT_EQ(second.profile.total, first.profile.total);
  EXPECT_EQ(second.profile.skipped, written);
  EXPECT_EQ(second.profile.measured + second.profile.skipped, second.profile.total);
  EXPECT_TRUE(second.profile.pace_end.recorded());
  EXPECT_TRUE(v.statusLabel()->text().contains(QStringLiteral("GFLOP/s at the end")))
      << v.statusLabel()->text().toStdString();
  EXPECT_EQ(v.progressBar()->value(), second.profile.total);
  EXPECT_EQ(v.progressBar()->maximum(), second.profile.total);
  const auto all = checkDb(db);
  EXPECT_EQ(static_cast<int>(all.size()), second.profile.total);
  for (const auto& id : identities(kept)) EXPECT_EQ(identities(all).count(id), 1U);
  expectTableHolds(*v.pointModel(), all);
  // A finished profile can become the cost source.
  EXPECT_TRUE(v.useAsCostsButton()->isEnabled());
  EXPECT_EQ(v.validateDbEdit()->text().toStdString(), db);
  // Both runs took the rotation of the Cold rotation field, which validate reads back; the note
  // that it is small for this CPU's last-level cache is the CLI's, shown where this CPU has one.
  constexpr std::size_t kTinyColdBytes = std::size_t{kTinyColdMib} << 20;
  auto runs = [&] {
    auto opened = planner::CostDb::open(db, false);
    EXPECT_TRUE(opened.ok());
    if (!opened.ok()) return std::vector<planner::RunInfo>{};
    auto read = (*opened)->runs();
    EXPECT_TRUE(read.ok());
    return read.ok() ? *read : std::vector<planner::RunInfo>{};
  };
  ASSERT_EQ(runs().size(), 2U);
  for (const auto& r : runs()) EXPECT_EQ(profiler::recorded_cold_bytes(r), kTinyColdBytes);
  auto done = planner::make_cost_setup(planner::kDefaultCluster, db);
  ASSERT_TRUE(done.ok()) << done.error().message;
  const auto cold = profiler::profiled_cold_bytes(*done);
  ASSERT_TRUE(cold.ok());
  EXPECT_EQ(*cold, kTinyColdBytes);
  const std::string note = profiler::cold_rotation_note(
      profiler::current_environment().last_level_cache_bytes, kTinyColdBytes);
  EXPECT_EQ(second.coldNote.toStdString(), note);
  const int total = second.profile.total;  // `second` is the last outcome: the next run replaces it
  EXPECT_EQ(v.statusLabel()->text().contains(QStringLiteral(" Note: this CPU's last-level cache")),
            !note.empty())
      << v.statusLabel()->text().toStdString();
  // Resuming it with another rotation is refused before any point, naming both rotations.
  v.coldMibSpin()->setValue(2 * kTinyColdMib);
  ASSERT_TRUE(v.startProfile()) << v.errorLabel()->text().toStdString();
  waitUntilIdle(v);
  EXPECT_TRUE(v.lastOutcome().error.startsWith(
      QStringLiteral("Cold rotation %1: %2 was profiled with a rotation of %3 MiB (run ")
          .arg(2 * kTinyColdMib)
          .arg(QString::fromStdString(db))
          .arg(kTinyColdMib)))
      << v.lastOutcome().error.toStdString();
  EXPECT_FALSE(v.errorLabel()->isHidden());
  EXPECT_EQ(runs().size(), 2U);
  EXPECT_EQ(static_cast<int>(checkDb(db).size()), total);
  fs::remove_all(dir);
}

TEST(GuiProfiling, ErrorsShowInTheViewAndNothingStarts) {
  app();
  Session session;
  ProfilingView v(&session);
  const std::string dir = testDir("errors");
  auto expectError = [&](bool started, const char* part) {
    EXPECT_FALSE(started) << part;
    EXPECT_FALSE(v.busy()) << part;
    EXPECT_FALSE(v.errorLabel()->isHidden()) << part;
    EXPECT_TRUE(v.errorLabel()->text().contains(QString::fromLatin1(part)))
        << v.errorLabel()->text().toStdString();
  };
  setTinyOptions(v, dir + "/missing/p.db");
  expectError(v.startProfile(), "does not exist");
  EXPECT_FALSE(fs::exists(dir + "/missing"));
  setTinyOptions(v, dir);
  expectError(v.startProfile(), "got a directory");
  setTinyOptions(v, dir + "/p.db");
  v.scaleSpin()->setValue(7);
  expectError(v.startProfile(), "Scale 7");
  EXPECT_FALSE(fs::exists(dir + "/p.db"));
  v.scaleSpin()->setValue(kTinyScale);
  // The weight format reaches profile and validate: MXFP4's groups of 32 do not divide the
  // tiny model's expert width, so both refuse before any work and name the field.
  v.weightsCombo()->setCurrentText(QStringLiteral("mxfp4"));
  expectError(v.startProfile(), "Weight dtype: mxfp4 groups of 32 inputs do not divide");
  EXPECT_FALSE(fs::exists(dir + "/p.db"));
  v.validateDbEdit()->setText(QString::fromStdString(dir + "/none.db"));  // not read before
  expectError(v.startValidate(), "Weight dtype: mxfp4 groups of 32 inputs do not divide");
  v.weightsCombo()->setCurrentIndex(0);
  v.validateDbEdit()->clear();
  expectError(v.startValidate(), "Cost DB: expected");
  v.validateDbEdit()->setText(QString::fromStdString(dir + "/none.db"));
  expectError(v.startValidate(), "no such file");
  // An empty database (the options are checked before it is read).
  const std::string empty = dir + "/empty.db";
  ASSERT_TRUE(planner::CostDb::open(empty, true).ok());
  v.validateDbEdit()->setText(QString::fromStdString(empty));
  v.tokensEdit()->setText(QStringLiteral("33"));
  expectError(v.startValidate(), "Tokens: expected");
  v.tokensEdit()->setText(QStringLiteral("32"));
  v.layoutsEdit()->setText(QStringLiteral("3x1"));
  expectError(v.startValidate(), "3x1");
  v.layoutsEdit()->setText(QStringLiteral("all"));
  expectError(v.startValidate(), "no profile of 2 ranks");
  EXPECT_FALSE(v.openDatabase(QString::fromStdString(dir + "/none.db")));
  EXPECT_FALSE(v.errorLabel()->isHidden());
  EXPECT_FALSE(v.useAsCostsButton()->isEnabled());
  // A database that opens clears the error.
  EXPECT_TRUE(v.openDatabase(QString::fromStdString(empty)));
  EXPECT_EQ(v.pointModel()->rowCount(), 0);
  EXPECT_TRUE(v.errorLabel()->isHidden());
  fs::remove_all(dir);
}

TEST(GuiProfiling, ValidateShowsTheLibrarysPredictionsAgainstTheMeasuredLayer) {
  app();
  Session session;
  ProfilingView v(&session);
  setTinyOptions(v, tinyProfileDb());
  v.validateDbEdit()->setText(QString::fromStdString(tinyProfileDb()));
  v.layoutsEdit()->setText(QStringLiteral("all"));
  v.dispatchersEdit()->setText(QStringLiteral("all"));
  v.tokensEdit()->setText(QStringLiteral("32"));
  ASSERT_TRUE(v.startValidate()) << v.errorLabel()->text().toStdString();
  waitUntilIdle(v);
  const auto& out = v.lastOutcome();
  ASSERT_TRUE(out.error.isEmpty()) << out.error.toStdString();
  ASSERT_TRUE(out.validate);
  EXPECT_FALSE(out.stopped);

  // The same request and predictions through the library, as `moeplan validate` makes them.
  profiler::ValidateOptions o;
  o.model = kTinyModel;
  o.scale = kTinyScale;
  o.costs = tinyProfileDb();
  o.tokens = "32";
  o.max_seconds = 0.05;
  auto req = profiler::make_validate_request(o, kTinyRanks);
  ASSERT_TRUE(req.ok()) << req.error().message;
  auto setup = planner::make_cost_setup("local:2", o.costs, req->statistic);
  ASSERT_TRUE(setup.ok()) << setup.error().message;
  ASSERT_EQ(out.rows.size(), req->cases.size());
  auto rows = out.rows;
  for (auto& r : rows) r.predicted = r.roofline = {};
  ASSERT_TRUE(profiler::add_predictions(*req, *setup, rows, kTinyRanks).ok());

  const QTableWidget* t = v.validateTable();
  ASSERT_EQ(t->rowCount(), static_cast<int>(rows.size()));
  auto* series = qobject_cast<QBarSeries*>(v.validateChart()->chart()->series().value(0));
  ASSERT_NE(series, nullptr);
  ASSERT_EQ(series->count(), 3);  // measured, predicted (cost DB), roofline
  for (int i = 0; i < t->rowCount(); ++i) {
    const auto& gui = out.rows[static_cast<std::size_t>(i)];
    const auto& lib = rows[static_cast<std::size_t>(i)];
    EXPECT_EQ(gui.c.layout.short_name(),
              req->cases[static_cast<std::size_t>(i)].layout.short_name());
    EXPECT_EQ(gui.c.layout.dispatcher, req->cases[static_cast<std::size_t>(i)].layout.dispatcher);
    EXPECT_TRUE(gui.verified) << gui.verify_detail;
    EXPECT_GT(gui.measured_s, 0.0);
    EXPECT_EQ(gui.predicted.total(), lib.predicted.total());
    EXPECT_EQ(gui.roofline.total(), lib.roofline.total());
    EXPECT_EQ(profiler::source_summary(gui.predicted), profiler::source_summary(lib.predicted));
    EXPECT_EQ(t->item(i, 0)->text().toStdString(), gui.c.layout.short_name());
    EXPECT_EQ(t->item(i, 3)->text(), QString::number(gui.measured_s * 1e3, 'f', 3));
    EXPECT_EQ(t->item(i, 4)->text(), QString::number(lib.predicted.total() * 1e3, 'f', 3));
    EXPECT_EQ(t->item(i, 5)->text(),
              QString::number(
                  100.0 * profiler::relative_error(lib.predicted.total(), gui.measured_s), 'f', 1) +
                  QStringLiteral("%"));
    EXPECT_EQ(t->item(i, 6)->text(), QString::number(lib.roofline.total() * 1e3, 'f', 3));
    EXPECT_DOUBLE_EQ(series->barSets()[0]->at(i), gui.measured_s * 1e3);
    EXPECT_DOUBLE_EQ(series->barSets()[1]->at(i), lib.predicted.total() * 1e3);
    EXPECT_DOUBLE_EQ(series->barSets()[2]->at(i), lib.roofline.total() * 1e3);
  }
  // The machine's pace around the cases against the pace the profile recorded, in the summary.
  EXPECT_TRUE(out.pace.profile_recorded);
  EXPECT_TRUE(out.pace.before.recorded());
  EXPECT_TRUE(out.pace.after.recorded());
  EXPECT_TRUE(v.validateSummaryLabel()->text().contains(
      QStringLiteral("Machine pace (bf16 GEMM 256×1024×1024, weights cold): profile ")))
      << v.validateSummaryLabel()->text().toStdString();
}

// The attention block on one rank (validate --attention --scope block): the GUI's rows, table
// and chart are the library's measurements and predictions; the Part's own errors show.
TEST(GuiProfiling, ValidatesTheAttentionBlockOnOneRank) {
  app();
  const std::string dir = testDir("attnblock");
  const std::string db = dir + "/one.db";
  {
    profiler::ProfileOptions po = tinyProfileOptions(db);
    po.ops = "attention,gemm,norm,rope";
    auto req = profiler::make_profile_request(po, 1);
    ASSERT_TRUE(req.ok()) << req.error().message;
    Result<profiler::ProfileSummary> sum = Error{"not run"};
    kernels::run_in_process(1, [&](kernels::Communicator& world) {
      auto r = profiler::run_profile(world, *req, {}, {});
      if (world.rank() == 0) sum = std::move(r);
    });
    ASSERT_TRUE(sum.ok()) << sum.error().message;
  }
  Session session;
  ProfilingView v(&session);
  setTinyOptions(v, db);
  v.validateDbEdit()->setText(QString::fromStdString(db));
  v.partCombo()->setCurrentIndex(2);  // attention block
  EXPECT_FALSE(v.tokensEdit()->isEnabled());
  EXPECT_TRUE(v.contextsEdit()->isEnabled());
  v.contextsEdit()->setText(QStringLiteral("64"));
  v.batchesEdit()->setText(QStringLiteral("2"));
  v.ranksSpin()->setValue(2);
  EXPECT_FALSE(v.startValidate());
  EXPECT_NE(v.errorLabel()->text().indexOf(QStringLiteral("Ranks 2: the attention core")), -1)
      << v.errorLabel()->text().toStdString();
  v.ranksSpin()->setValue(1);
  ASSERT_TRUE(v.startValidate()) << v.errorLabel()->text().toStdString();
  waitUntilIdle(v);
  const auto& out = v.lastOutcome();
  ASSERT_TRUE(out.error.isEmpty()) << out.error.toStdString();
  ASSERT_TRUE(out.attention);
  EXPECT_EQ(out.scope, profiler::AttentionScope::kBlock);
  ASSERT_EQ(out.attentionRows.size(), 2U);  // prefill 64, decode 2 × 64

  profiler::AttentionValidateOptions a;
  a.model = kTinyModel;
  a.costs = db;
  a.contexts = "64";
  a.batches = "2";
  a.scope = "block";
  auto req = profiler::make_attention_validate_request(a);
  ASSERT_TRUE(req.ok()) << req.error().message;
  auto setup = planner::make_cost_setup(req->cluster, a.costs, req->statistic);
  ASSERT_TRUE(setup.ok()) << setup.error().message;
  auto rows = out.attentionRows;
  for (auto& r : rows) r.predicted = r.roofline = {};
  ASSERT_TRUE(profiler::add_attention_predictions(*req, *setup, rows).ok());
  const QTableWidget* t = v.validateTable();
  ASSERT_EQ(t->rowCount(), 2);
  EXPECT_EQ(t->horizontalHeaderItem(0)->text(), QStringLiteral("phase"));
  auto* series = qobject_cast<QBarSeries*>(v.validateChart()->chart()->series().value(0));
  ASSERT_NE(series, nullptr);
  for (int i = 0; i < 2; ++i) {
    const auto& gui = out.attentionRows[static_cast<std::size_t>(i)];
    const auto& lib = rows[static_cast<std::size_t>(i)];
    EXPECT_TRUE(gui.verified) << gui.verify_detail;
    EXPECT_EQ(gui.predicted.seconds, lib.predicted.seconds);
    EXPECT_EQ(gui.roofline.seconds, lib.roofline.seconds);
    EXPECT_EQ(t->item(i, 0)->text(), i == 0 ? QStringLiteral("prefill") : QStringLiteral("decode"));
    EXPECT_EQ(t->item(i, 4)->text(), QString::number(lib.predicted.seconds * 1e3, 'f', 3));
    EXPECT_DOUBLE_EQ(series->barSets()[0]->at(i), gui.measured_s * 1e3);
    EXPECT_DOUBLE_EQ(series->barSets()[1]->at(i), lib.predicted.seconds * 1e3);
  }
  EXPECT_TRUE(out.pace.before.recorded());
  EXPECT_TRUE(out.pace.after.recorded());
  EXPECT_TRUE(v.validateSummaryLabel()->text().contains(QStringLiteral("Machine pace (")))
      << v.validateSummaryLabel()->text().toStdString();
  // A context past the model's maximum is refused before any work, the field named.
  v.contextsEdit()->setText(QStringLiteral("99999999"));
  EXPECT_FALSE(v.startValidate());
  EXPECT_EQ(v.errorLabel()->text().indexOf(QStringLiteral("Contexts")), 0)
      << v.errorLabel()->text().toStdString();
  // Back to the MoE layer: its own fields again.
  v.partCombo()->setCurrentIndex(0);
  EXPECT_TRUE(v.tokensEdit()->isEnabled());
  EXPECT_FALSE(v.contextsEdit()->isEnabled());
  fs::remove_all(dir);
}

TEST(GuiProfiling, ValidatesTheDeepEpDispatchersOnRanksGroupedIntoNodes) {
  app();
  Session session;
  ProfilingView v(&session);
  setTinyOptions(v, tinyProfileDb());
  v.validateDbEdit()->setText(QString::fromStdString(tinyProfileDb()));
  v.layoutsEdit()->setText(QStringLiteral("2x1"));
  v.dispatchersEdit()->setText(QStringLiteral("deepep_normal,deepep_ll"));
  v.tokensEdit()->setText(QStringLiteral("32"));
  // One node (the default): deepep_normal cannot run, said in the view, nothing starts.
  EXPECT_FALSE(v.startValidate());
  EXPECT_TRUE(v.errorLabel()->text().contains(QStringLiteral("at least two nodes")))
      << v.errorLabel()->text().toStdString();
  // The 2 ranks as 2 nodes of 1, typed as a user does.
  v.ranksPerNodeSpin()->setFocus();
  QTest::keyClick(v.ranksPerNodeSpin(), Qt::Key_Up);
  ASSERT_EQ(v.ranksPerNodeSpin()->value(), 1);
  ASSERT_TRUE(v.startValidate()) << v.errorLabel()->text().toStdString();
  waitUntilIdle(v);
  const auto& out = v.lastOutcome();
  ASSERT_TRUE(out.error.isEmpty()) << out.error.toStdString();
  ASSERT_EQ(out.rows.size(), 2U);

  // The library's predictions for the same request, on the cluster validate predicts on.
  profiler::ValidateOptions o;
  o.model = kTinyModel;
  o.scale = kTinyScale;
  o.costs = tinyProfileDb();
  o.layouts = "2x1";
  o.dispatchers = "deepep_normal,deepep_ll";
  o.tokens = "32";
  o.ranks_per_node = 1;
  auto req = profiler::make_validate_request(o, kTinyRanks);
  ASSERT_TRUE(req.ok()) << req.error().message;
  EXPECT_EQ(req->cluster(), "local:2x1");
  auto setup = planner::make_cost_setup(req->cluster(), o.costs, req->statistic, true);
  ASSERT_TRUE(setup.ok()) << setup.error().message;
  auto rows = out.rows;
  for (auto& r : rows) r.predicted = r.roofline = {};
  ASSERT_TRUE(profiler::add_predictions(*req, *setup, rows, kTinyRanks).ok());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(out.rows[i].c.layout.dispatcher, req->cases[i].layout.dispatcher);
    EXPECT_TRUE(out.rows[i].verified) << out.rows[i].verify_detail;
    EXPECT_GT(out.rows[i].measured_s, 0.0);
    EXPECT_EQ(out.rows[i].predicted.total(), rows[i].predicted.total());
  }
}

TEST(GuiProfiling, ProfileDbCostSourcePlansAsPlanCostsAndIsRemembered) {
  app();
  MainWindow w;
  ASSERT_TRUE(w.loadModel(QString::fromLatin1(kTinyModel)));
  w.waitForIdle();
  const std::string db = tinyProfileDb();
  // A file that is not there: the error shows in the model view, the roofline stays.
  EXPECT_FALSE(w.loadCosts(QStringLiteral("/nonexistent/p.db")));
  EXPECT_FALSE(w.costErrorLabel()->isHidden());
  EXPECT_TRUE(w.costErrorLabel()->text().contains(QStringLiteral("no such file")));
  EXPECT_EQ(w.costSourceCombo()->currentIndex(), 0);
  EXPECT_TRUE(w.session()->costDb().isEmpty());

  ASSERT_TRUE(w.loadCosts(QString::fromStdString(db)));
  EXPECT_TRUE(w.costErrorLabel()->isHidden());
  EXPECT_EQ(w.costSourceCombo()->currentIndex(), 1);
  w.waitForIdle();
  const auto plan = w.session()->plan();
  ASSERT_NE(plan, nullptr) << w.session()->planError().toStdString();
  EXPECT_EQ(plan->cost_source, "measured:" + db);

  // `moeplan plan --model M --costs FILE` on the same cluster and load.
  auto model = models::load_model(kTinyModel);
  ASSERT_TRUE(model.ok());
  auto setup = planner::make_cost_setup(planner::kDefaultCluster, db);
  ASSERT_TRUE(setup.ok()) << setup.error().message;
  auto load = planner::synthetic_load("uniform", &*model);
  ASSERT_TRUE(load.ok());
  planner::PlanRequest req;
  req.load = load->load;
  auto lib = planner::make_plan(*model, *setup->cluster, setup->costs(), req);
  ASSERT_TRUE(lib.ok()) << lib.error().message;
  EXPECT_EQ(plan->cost_source, lib->cost_source);
  EXPECT_EQ(plan->recommended, lib->recommended);
  ASSERT_EQ(plan->layouts.size(), lib->layouts.size());
  for (std::size_t i = 0; i < lib->layouts.size(); ++i) {
    const auto& a = plan->layouts[i].per_layer;
    const auto& b = lib->layouts[i].per_layer;
    EXPECT_EQ(plan->layouts[i].layout.shape_name(), lib->layouts[i].layout.shape_name());
    for (const auto& [x, y] : {std::pair{&a.router, &b.router},
                               {&a.dispatch, &b.dispatch},
                               {&a.experts, &b.experts},
                               {&a.combine, &b.combine},
                               {&a.tp, &b.tp},
                               {&a.shared, &b.shared}}) {
      EXPECT_EQ(x->seconds, y->seconds) << i;
      EXPECT_EQ(x->source, y->source) << i;
    }
    EXPECT_EQ(plan->layouts[i].step_seconds, lib->layouts[i].step_seconds) << i;
  }
  // The layouts view names the source: the recommendation and each figure's tooltip.
  EXPECT_TRUE(w.layoutsView()->recommendation()->text().contains(QString::fromStdString(db)));
  const auto* m = w.layoutsView()->model();
  const QString tip = m->index(0, PlanTableModel::kExperts).data(Qt::ToolTipRole).toString();
  EXPECT_TRUE(tip.contains(QString::fromStdString(lib->layouts[0].per_layer.experts.source)))
      << tip.toStdString();

  // Back to the roofline.
  w.costSourceCombo()->setCurrentIndex(0);
  emit w.costSourceCombo()->activated(0);
  w.waitForIdle();
  EXPECT_TRUE(w.session()->costDb().isEmpty());
  EXPECT_EQ(w.session()->plan()->cost_source,
            planner::make_cost_setup(*w.session()->cluster(), "")->costs().name());

  // The profiling view's "Use as cost source" sets the same source.
  ASSERT_TRUE(w.profilingView()->openDatabase(QString::fromStdString(db)));
  w.profilingView()->useAsCostsButton()->click();
  EXPECT_EQ(w.session()->costDb().toStdString(), db);
  EXPECT_EQ(w.costSourceCombo()->currentIndex(), 1);
  w.waitForIdle();
  EXPECT_EQ(w.session()->plan()->cost_source, "measured:" + db);

  // Settings remember the cost DB (same test: one tiny profile per test process).
  QCoreApplication::setOrganizationName(QStringLiteral("moeplan-gui-test"));
  QSettings().clear();
  {
    MainWindow first(nullptr, true);
    ASSERT_TRUE(first.loadCosts(QString::fromStdString(db)));
    first.close();
  }
  MainWindow again(nullptr, true);
  EXPECT_EQ(again.session()->costDb().toStdString(), db);
  EXPECT_EQ(again.costSourceCombo()->currentIndex(), 1);
  QSettings().clear();
}

}  // namespace
}  // namespace test_profiling
}  // namespace moeplan::gui
