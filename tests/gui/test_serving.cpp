// The Serving view under QT_QPA_PLATFORM=offscreen: its table and recommendation hold the
// library's serving plan (planner::plan_serving) for the same inputs, as `moeplan plan --disagg`
// plans it; its own bad inputs show in the view, and a cancelled plan leaves the last one.
#include <gtest/gtest.h>

#include <cmath>

#include <QDoubleSpinBox>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTableWidget>

#include "app/gui/main_window.hpp"
#include "app/gui/serving_view.hpp"
#include "app/gui/session.hpp"
#include "models/registry.hpp"
#include "models/units.hpp"
#include "planner/costs/cost_setup.hpp"
#include "planner/placement/load_io.hpp"
#include "planner/serving.hpp"
#include "planner/topology/cluster.hpp"
#include "tests/gui/gui_app.hpp"

namespace moeplan::gui {
namespace test_serving {
namespace {

/// The serving plan the library makes for the window's inputs: Qwen3-30B-A3B on one HGX H200,
/// the uniform load, contiguous placement, requests of 1024 + 256 tokens.
planner::ServingPlan libraryServing(double ttft_ms, double tpot_ms, int budget, double rate = 0.0,
                                    double percentile = 0.0, std::vector<int> batches = {}) {
  auto model = models::load_model("qwen3-30b-a3b");
  auto cluster = planner::load_cluster("1x-hgx-h200");
  auto load = planner::synthetic_load("uniform", &*model);
  EXPECT_TRUE(model && cluster && load);
  planner::PlanChoices choices;
  choices.phase = "decode";
  choices.isl = 1024;
  choices.osl = 256;
  auto req = planner::make_plan_request(*model, *cluster, choices, load->load, true);
  EXPECT_TRUE(req) << req.error().message;
  planner::ServingRequest sreq;
  sreq.base = *req;
  sreq.gpu_budget = budget;
  sreq.ttft_target_s = ttft_ms * 1e-3;
  sreq.tpot_target_s = tpot_ms * 1e-3;
  sreq.arrival_rate = rate;
  sreq.ttft_percentile = percentile / 100.0;
  sreq.decode_batches = std::move(batches);
  auto setup = planner::make_cost_setup(*cluster, "");
  EXPECT_TRUE(setup) << setup.error().message;
  auto plan = planner::plan_serving(*model, *cluster, setup->costs(), sreq);
  EXPECT_TRUE(plan) << plan.error().message;
  return *plan;
}

TEST(GuiServing, TableAndRecommendationAreTheLibrarysServingPlan) {
  app();
  MainWindow w;
  ASSERT_TRUE(w.loadModel(QStringLiteral("qwen3-30b-a3b")));
  ASSERT_TRUE(w.loadCluster(QStringLiteral("1x-hgx-h200")));
  w.waitForIdle();
  ServingView* v = w.servingView();
  // Without the requests' context there is nothing to plan: the field is named.
  EXPECT_FALSE(v->start());
  EXPECT_EQ(v->errorLabel()->text().indexOf(QStringLiteral("Context (input tokens)")), 0)
      << v->errorLabel()->text().toStdString();
  EXPECT_EQ(v->table()->rowCount(), 0);

  w.islSpin()->setValue(1024);
  w.oslSpin()->setValue(256);
  w.waitForIdle();
  v->budgetSpin()->setValue(1);  // a budget of one GPU leaves no second pool
  EXPECT_FALSE(v->start());
  EXPECT_EQ(v->errorLabel()->text().indexOf(QStringLiteral("GPU budget 1: expected 0")), 0)
      << v->errorLabel()->text().toStdString();

  v->budgetSpin()->setValue(0);
  v->tpotSpin()->setValue(30.0);
  QSignalSpy started(w.session(), &Session::servingStarted);
  ASSERT_TRUE(v->start()) << v->errorLabel()->text().toStdString();
  EXPECT_EQ(started.count(), 1);
  EXPECT_FALSE(v->planButton()->isEnabled());  // one serving plan at a time
  w.waitForIdle();
  EXPECT_TRUE(v->planButton()->isEnabled());
  EXPECT_TRUE(v->errorLabel()->isHidden());
  const auto gui = w.session()->serving();
  ASSERT_NE(gui, nullptr);
  const planner::ServingPlan lib = libraryServing(0.0, 30.0, 0);
  EXPECT_EQ(planner::serving_to_json(*gui), planner::serving_to_json(lib));
  ASSERT_TRUE(lib.disaggregated && lib.aggregated);
  // Rows: disaggregated prefill, disaggregated decode, aggregated; the figures as printed.
  ASSERT_EQ(v->table()->rowCount(), 3);
  const auto& d = *lib.disaggregated;
  auto cell = [&](int r, int c) { return v->table()->item(r, c)->text().toStdString(); };
  EXPECT_EQ(cell(0, 1), "prefill");
  EXPECT_EQ(cell(0, 2), std::to_string(d.prefill_instances));
  EXPECT_EQ(cell(0, 4), d.prefill.layout.layout.shape_name() + " " +
                            planner::dispatcher_name(d.prefill.layout.layout.dispatcher));
  // No TTFT target: the slower pool runs at its capacity and the TTFT is unbounded.
  EXPECT_FALSE(std::isfinite(d.ttft_s));
  EXPECT_EQ(cell(0, 6), "unbounded");
  EXPECT_EQ(cell(1, 1), "decode");
  EXPECT_EQ(cell(1, 3), std::to_string(d.decode.gpus));
  EXPECT_EQ(cell(1, 7), format_fixed(d.tpot_s * 1e3, 2));
  EXPECT_EQ(cell(1, 9), format_fixed(d.tokens_per_s_per_gpu, 1));
  EXPECT_EQ(cell(2, 0), "aggregated");
  EXPECT_EQ(cell(2, 9), format_fixed(lib.aggregated->tokens_per_s_per_gpu, 1));
  EXPECT_LE(d.tpot_s, 30e-3);
  const QString rec = v->recommendation()->text();
  EXPECT_NE(rec.indexOf(QStringLiteral("Recommended: ") + QString::fromStdString(lib.recommended)),
            -1)
      << rec.toStdString();
  EXPECT_NE(rec.indexOf(QStringLiteral("KV cache per request")), -1);
  EXPECT_NE(v->header()->text().indexOf(QStringLiteral("TPOT ≤ 30.00 ms")), -1)
      << v->header()->text().toStdString();

  // An offered rate: the library's fewest-GPU plan, named in the header.
  v->rateSpin()->setValue(40.0);
  ASSERT_TRUE(v->start()) << v->errorLabel()->text().toStdString();
  w.waitForIdle();
  const auto offered = w.session()->serving();
  ASSERT_NE(offered, nullptr);
  EXPECT_EQ(planner::serving_to_json(*offered),
            planner::serving_to_json(libraryServing(0.0, 30.0, 0, 40.0)));
  EXPECT_NE(v->header()->text().indexOf(QStringLiteral("40.00 requests/s offered")), -1)
      << v->header()->text().toStdString();
  EXPECT_NE(v->recommendation()->text().indexOf(QStringLiteral("over the GPUs used")), -1);

  // A p99 target and given batches: the library's plan for them, the column named.
  v->rateSpin()->setValue(0.0);
  v->ttftSpin()->setValue(300.0);
  v->percentileSpin()->setValue(99.0);
  v->batchesEdit()->setText(QStringLiteral("384, 64"));
  ASSERT_TRUE(v->start()) << v->errorLabel()->text().toStdString();
  w.waitForIdle();
  ASSERT_NE(w.session()->serving(), nullptr);
  EXPECT_EQ(planner::serving_to_json(*w.session()->serving()),
            planner::serving_to_json(libraryServing(300.0, 30.0, 0, 0.0, 99.0, {64, 384})));
  EXPECT_EQ(v->table()->horizontalHeaderItem(6)->text(), QStringLiteral("TTFT p99 ms"));
  EXPECT_NE(v->header()->text().indexOf(QStringLiteral("TTFT ≤ 300.0 ms at p99")), -1)
      << v->header()->text().toStdString();
  // A batch that is not a count: said so, nothing planned.
  v->batchesEdit()->setText(QStringLiteral("64, many"));
  EXPECT_FALSE(v->start());
  EXPECT_EQ(v->errorLabel()->text().indexOf(QStringLiteral("Decode batches: expected")), 0)
      << v->errorLabel()->text().toStdString();
  v->batchesEdit()->clear();
  v->percentileSpin()->setValue(0.0);
  v->ttftSpin()->setValue(0.0);
  ASSERT_TRUE(v->start());
  w.waitForIdle();
  const auto gui_offered = w.session()->serving();
  ASSERT_NE(gui_offered, nullptr);

  // A cancelled plan is dropped: the last one stays, and the view says so.
  v->rateSpin()->setValue(0.0);
  v->tpotSpin()->setValue(0.0);
  QSignalSpy cancelled(w.session(), &Session::servingCancelled);
  ASSERT_TRUE(v->start());
  v->cancelButton()->click();
  EXPECT_EQ(cancelled.count(), 1);
  w.waitForIdle();
  EXPECT_EQ(w.session()->serving(), gui_offered);
  EXPECT_EQ(v->errorLabel()->text(), QStringLiteral("Serving plan cancelled."));
  EXPECT_TRUE(v->planButton()->isEnabled());
}

// Targets no deployment meets: the reason names what to change by this view's fields (the
// library says "{rate}"; the CLI prints "--rate").
TEST(GuiServing, ReasonsNameThisViewsFields) {
  app();
  MainWindow w;
  ASSERT_TRUE(w.loadModel(QStringLiteral("qwen3-30b-a3b")));
  ASSERT_TRUE(w.loadCluster(QStringLiteral("1x-hgx-h200")));
  w.islSpin()->setValue(1024);
  w.oslSpin()->setValue(256);
  w.waitForIdle();
  ServingView* v = w.servingView();
  v->tpotSpin()->setValue(0.01);
  v->rateSpin()->setValue(40.0);
  ASSERT_TRUE(v->start()) << v->errorLabel()->text().toStdString();
  w.waitForIdle();
  ASSERT_NE(w.session()->serving(), nullptr);
  EXPECT_EQ(w.session()->serving()->recommended, "");
  const QString rec = v->recommendation()->text();
  EXPECT_NE(rec.indexOf(QStringLiteral("lower Offered rate, relax TTFT target/TPOT target, shorten "
                                       "Context (input tokens)/Context (output tokens)")),
            -1)
      << rec.toStdString();
  EXPECT_EQ(rec.indexOf(QLatin1Char('{')), -1) << rec.toStdString();
}

}  // namespace
}  // namespace test_serving
}  // namespace moeplan::gui
