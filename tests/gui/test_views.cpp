// The views under QT_QPA_PLATFORM=offscreen: the layouts table model holds the planner's Plan
// row for row; topology edits produce the cluster the parser builds from the edited JSON;
// load-balance and traffic figures equal the planner's for the same inputs; errors show in
// the view that caused them.
#include <gtest/gtest.h>

#include <QBarSeries>
#include <QBarSet>
#include <QChart>
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFile>
#include <QFileInfo>
#include <QGraphicsScene>
#include <QGraphicsSimpleTextItem>
#include <QLabel>
#include <QLineSeries>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QXYSeries>

#include "app/gui/charts.hpp"
#include "app/gui/layouts_view.hpp"
#include "app/gui/load_view.hpp"
#include "app/gui/main_window.hpp"
#include "app/gui/plan_table_model.hpp"
#include "app/gui/session.hpp"
#include "app/gui/topology_view.hpp"
#include "models/registry.hpp"
#include "models/resources.hpp"
#include "planner/costs/cost_setup.hpp"
#include "planner/costs/roofline_costs.hpp"
#include "planner/layout_figures.hpp"
#include "planner/placement/load_io.hpp"
#include "planner/placement/place_run.hpp"
#include "planner/placement/placement_file.hpp"
#include "planner/rebalance.hpp"
#include "planner/time_search.hpp"
#include "tests/gui/gui_app.hpp"

namespace moeplan::gui {
namespace test_views {
namespace {

constexpr const char* kSkewed = "powerlaw:alpha=1.2,shuffle=1";

planner::Plan libraryPlan(const QString& loadSpec, planner::PlacementPolicy policy) {
  auto model = models::load_model(models::kDefaultModel);
  auto cluster = planner::load_cluster(planner::kDefaultCluster);
  auto load = planner::synthetic_load(loadSpec.toStdString(), &*model);
  EXPECT_TRUE(model && cluster && load);
  planner::PlanRequest req;
  req.load = load->load;
  if (policy != planner::PlacementPolicy::kContiguous) {
    planner::PolicyFit fit;
    fit.policy = policy;
    fit.gpus_per_node = cluster->info().gpus_per_node;
    fit.num_groups = model->router.num_groups;
    fit.pairs_per_step =
        static_cast<std::int64_t>(req.workload.tokens_per_gpu) * model->num_experts_per_tok;
    req.placement = planner::policy_placement_fn(load->load, fit);
  }
  // The cost source `moeplan plan` sets up without --costs.
  auto setup = planner::make_cost_setup(*cluster, "");
  EXPECT_TRUE(setup) << setup.error().message;
  auto plan = planner::make_plan(*model, *cluster, setup->costs(), req);
  EXPECT_TRUE(plan) << plan.error().message;
  return *plan;
}

void expectModelHoldsPlan(const PlanTableModel& m, const planner::Plan& plan) {
  ASSERT_EQ(m.rowCount(), static_cast<int>(plan.layouts.size()));
  ASSERT_EQ(m.columnCount(), PlanTableModel::kNumColumns);
  for (int r = 0; r < m.rowCount(); ++r) {
    const auto& c = plan.layouts[static_cast<std::size_t>(r)];
    auto v = [&](int col) { return m.index(r, col).data(PlanTableModel::kValueRole); };
    EXPECT_EQ(v(PlanTableModel::kLayout).toString().toStdString(), c.layout.shape_name());
    EXPECT_EQ(v(PlanTableModel::kDispatcher).toString().toStdString(),
              planner::dispatcher_name(c.layout.dispatcher));
    EXPECT_EQ(v(PlanTableModel::kMapping).toString().toStdString(),
              planner::mapping_name(c.layout.mapping));
    EXPECT_EQ(v(PlanTableModel::kRouter).toDouble(), c.per_layer.router.seconds);
    EXPECT_EQ(v(PlanTableModel::kDispatch).toDouble(), c.per_layer.dispatch.seconds);
    EXPECT_EQ(v(PlanTableModel::kExperts).toDouble(), c.per_layer.experts.seconds);
    EXPECT_EQ(v(PlanTableModel::kCombine).toDouble(), c.per_layer.combine.seconds);
    EXPECT_EQ(v(PlanTableModel::kTp).toDouble(), c.per_layer.tp.seconds);
    EXPECT_EQ(v(PlanTableModel::kShared).toDouble(), c.per_layer.shared.seconds);
    EXPECT_EQ(v(PlanTableModel::kAttention).toDouble(), c.dense.attention.seconds);
    EXPECT_GT(c.dense.attention.seconds, 0.0);
    EXPECT_EQ(v(PlanTableModel::kStepTime).toDouble(), c.step_seconds);
    EXPECT_EQ(v(PlanTableModel::kThroughput).toDouble(), c.tokens_per_s_per_gpu);
    EXPECT_EQ(v(PlanTableModel::kMemory).toDouble(), c.memory.total());
    EXPECT_EQ(v(PlanTableModel::kFits).toBool(), c.feasible);
    EXPECT_EQ(m.index(r, 0).data(PlanTableModel::kRecommendedRole).toBool(), r == plan.recommended);
    EXPECT_EQ(m.index(r, PlanTableModel::kStepTime).data(Qt::DisplayRole).toString(),
              QString::number(c.step_seconds * 1e3, 'f', 3));
  }
}

TEST(GuiLayouts, TableModelHoldsThePlannersPlan) {
  app();
  MainWindow w;
  w.waitForIdle();
  const auto* m = w.layoutsView()->model();
  ASSERT_NE(m->plan(), nullptr);
  expectModelHoldsPlan(
      *m, libraryPlan(QStringLiteral("uniform"), planner::PlacementPolicy::kContiguous));
  EXPECT_EQ(m->plan()->cost_source,
            planner::make_cost_setup(*w.session()->cluster(), "")->costs().name());
  EXPECT_TRUE(w.layoutsView()->recommendation()->text().contains(QStringLiteral("Recommended")));
  EXPECT_EQ(w.session()->selectedLayout(), m->plan()->recommended);
}

TEST(GuiLayouts, SkewedLoadWithEplbMatchesThePlanner) {
  app();
  MainWindow w;
  ASSERT_TRUE(w.loadLoad(QString::fromLatin1(kSkewed)));
  w.session()->setPolicy(planner::PlacementPolicy::kEplb, planner::Redundancy{});
  w.waitForIdle();
  expectModelHoldsPlan(*w.layoutsView()->model(),
                       libraryPlan(QString::fromLatin1(kSkewed), planner::PlacementPolicy::kEplb));
}

TEST(GuiLayouts, FiltersAndChartShareTheModel) {
  app();
  MainWindow w;
  w.resize(1366, 768);
  w.show();
  w.waitForIdle();
  w.tabs()->setCurrentWidget(w.layoutsView());
  LayoutsView* v = w.layoutsView();
  const planner::Plan& plan = *v->model()->plan();
  auto count = [&](auto pred) {
    return static_cast<int>(std::count_if(plan.layouts.begin(), plan.layouts.end(), pred));
  };
  v->dispatcherFilter()->setCurrentIndex(3);  // a2av
  EXPECT_EQ(v->filter()->rowCount(), count([](const planner::LayoutCost& c) {
              return c.layout.dispatcher == planner::Dispatcher::kA2av;
            }));
  v->mappingFilter()->setCurrentIndex(2);  // ep_innermost
  EXPECT_EQ(v->filter()->rowCount(), count([](const planner::LayoutCost& c) {
              return c.layout.dispatcher == planner::Dispatcher::kA2av &&
                     c.layout.mapping == planner::RankMapping::kEpInnermost;
            }));
  v->dispatcherFilter()->setCurrentIndex(0);
  v->mappingFilter()->setCurrentIndex(0);
  v->feasibleOnly()->setChecked(true);
  EXPECT_EQ(v->filter()->rowCount(),
            count([](const planner::LayoutCost& c) { return c.feasible; }));
  // The breakdown chart's bars are the filtered rows' times (bottom bar = first row).
  auto* series = qobject_cast<QAbstractBarSeries*>(v->breakdownChart()->chart()->series().at(0));
  ASSERT_NE(series, nullptr);
  // The first rows, as many as have room for their labels at this size.
  EXPECT_GE(v->breakdownChart()->shownRows(), 3);
  const int n = std::min(v->filter()->rowCount(), v->breakdownChart()->shownRows());
  ASSERT_EQ(series->barSets().at(2)->count(), n);  // experts
  const QModelIndex first = v->filter()->index(0, PlanTableModel::kExperts);
  EXPECT_DOUBLE_EQ(series->barSets().at(2)->at(n - 1),
                   first.data(PlanTableModel::kValueRole).toDouble() * 1e3);
}

TEST(GuiLayouts, DeepEpDispatchersAndTwoBatchOverlap) {
  app();
  MainWindow w;
  w.waitForIdle();
  LayoutsView* v = w.layoutsView();
  // The filter lists every dispatcher; the default plan (2 × HGX H200) has deepep_normal.
  ASSERT_EQ(v->dispatcherFilter()->count(), 6);
  EXPECT_EQ(v->dispatcherFilter()->itemText(4).toStdString(), "deepep_normal");
  v->dispatcherFilter()->setCurrentIndex(4);
  EXPECT_EQ(v->filter()->rowCount(), 1);
  v->dispatcherFilter()->setCurrentIndex(0);
  const std::size_t plain = v->model()->plan()->layouts.size();
  v->overlapChoice()->setCurrentText(QStringLiteral("both"));
  w.waitForIdle();
  const planner::Plan& plan = *v->model()->plan();
  ASSERT_EQ(plan.layouts.size(), 2 * plain);
  const auto overlapped = std::count_if(plan.layouts.begin(), plan.layouts.end(),
                                        [](const planner::LayoutCost& c) { return c.layout.tbo; });
  EXPECT_EQ(static_cast<std::size_t>(overlapped), plain);
  bool shown = false;
  for (int r = 0; r < v->model()->rowCount(); ++r) {
    shown = shown || v->model()
                         ->index(r, PlanTableModel::kDispatcher)
                         .data()
                         .toString()
                         .endsWith(QStringLiteral(" +tbo"));
  }
  EXPECT_TRUE(shown);
}

// deepep_ll's buffer is a field of the view, as `plan --ll-max-tokens`: a layout whose ranks
// dispatch more than it holds says so in its Fits cell and the reasons, naming the field.
TEST(GuiLayouts, LowLatencyBufferFieldPlansAsTheFlag) {
  app();
  MainWindow w;
  w.waitForIdle();
  LayoutsView* v = w.layoutsView();
  ASSERT_EQ(v->llMaxTokensField()->value(), planner::kDefaultLlMaxTokensPerRank);
  auto cannot_run = [&] {
    std::vector<std::size_t> rows;
    const auto& layouts = v->model()->plan()->layouts;
    for (std::size_t i = 0; i < layouts.size(); ++i) {
      if (!layouts[i].infeasible_reason.empty()) rows.push_back(i);
    }
    return rows;
  };
  // The default plan, prefill at 4,096 tokens per GPU, exceeds 128 tokens per rank.
  const auto refused = cannot_run();
  ASSERT_FALSE(refused.empty());
  for (const std::size_t i : refused) {
    const QString tip = v->model()
                            ->index(static_cast<int>(i), PlanTableModel::kFits)
                            .data(Qt::ToolTipRole)
                            .toString();
    EXPECT_TRUE(tip.startsWith(QStringLiteral("deepep_ll: 4096 tokens per rank exceed")))
        << tip.toStdString();
    EXPECT_TRUE(tip.endsWith(QStringLiteral("(raise DeepEP-LL buffer)"))) << tip.toStdString();
  }
  const QString rec = v->recommendation()->text();
  EXPECT_NE(rec.indexOf(QStringLiteral("(raise DeepEP-LL buffer)")), -1) << rec.toStdString();
  EXPECT_EQ(rec.indexOf(QLatin1Char('{')), -1) << rec.toStdString();
  const double small_buffer = v->model()->plan()->layouts[refused.front()].memory.buffers;
  const planner::Layout refused_layout = v->model()->plan()->layouts[refused.front()].layout;
  // Raised to the step's tokens: the plan's request carries it, no layout is refused for it, and
  // the layout that was holds the larger buffer (DeepEP's size grows with the tokens per rank).
  v->llMaxTokensField()->setValue(4096);
  w.waitForIdle();
  EXPECT_EQ(w.session()->choices().ll_max_tokens, std::optional<int>(4096));
  EXPECT_TRUE(cannot_run().empty());
  bool found = false;
  for (const auto& c : v->model()->plan()->layouts) {
    if (c.layout.full_name() != refused_layout.full_name()) continue;
    found = true;
    EXPECT_GT(c.memory.buffers, small_buffer);
  }
  EXPECT_TRUE(found);
}

// Decode plans carry the Pareto sweep of moeplan plan --pareto, drawn beside the charts; prefill
// plans have none and hide it.
TEST(GuiLayouts, DecodeParetoChartIsTheLibrarysSweep) {
  app();
  MainWindow w;
  ASSERT_TRUE(w.loadModel(QStringLiteral("qwen3-30b-a3b")));
  w.waitForIdle();
  EXPECT_TRUE(w.session()->pareto().empty());
  EXPECT_TRUE(w.layoutsView()->paretoChart()->isHidden());
  w.phaseCombo()->setCurrentIndex(1);  // decode
  w.waitForIdle();
  const auto plan = w.session()->plan();
  ASSERT_TRUE(plan != nullptr);
  ASSERT_EQ(plan->workload.phase, planner::Phase::kDecode);
  const auto& got = w.session()->pareto();
  ASSERT_FALSE(got.empty());
  // The same sweep the library makes from the plan's request.
  const auto model = models::load_model("qwen3-30b-a3b").value();
  const auto cluster = w.session()->cluster().value();
  planner::PlanRequest req;
  req.workload = plan->workload;
  const auto setup = planner::make_cost_setup(cluster, "");
  ASSERT_TRUE(setup.ok());
  auto want = planner::decode_pareto(model, cluster, setup->costs(), req,
                                     planner::default_pareto_batches());
  ASSERT_TRUE(want.ok());
  ASSERT_EQ(got.size(), want->size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].batch_per_gpu, (*want)[i].batch_per_gpu);
    EXPECT_DOUBLE_EQ(got[i].tokens_per_s_per_gpu, (*want)[i].tokens_per_s_per_gpu);
    EXPECT_EQ(got[i].on_front, (*want)[i].on_front);
  }
  ParetoChart* chart = w.layoutsView()->paretoChart();
  EXPECT_FALSE(chart->isHidden());
  ASSERT_EQ(chart->chart()->series().size(), 2);  // the front line, every point
  const auto* points = qobject_cast<QXYSeries*>(chart->chart()->series().at(1));
  ASSERT_NE(points, nullptr);
  EXPECT_EQ(points->count(), static_cast<int>(got.size()));
  const auto* front = qobject_cast<QXYSeries*>(chart->chart()->series().at(0));
  ASSERT_NE(front, nullptr);
  EXPECT_EQ(front->count(), static_cast<int>(std::count_if(
                                got.begin(), got.end(), [](const auto& p) { return p.on_front; })));
  w.phaseCombo()->setCurrentIndex(0);  // prefill
  w.waitForIdle();
  EXPECT_TRUE(w.session()->pareto().empty());
  EXPECT_TRUE(chart->isHidden());
}

TEST(GuiLayouts, SavesThePlanJson) {
  app();
  MainWindow w;
  w.waitForIdle();
  QTemporaryDir dir;
  const QString path = dir.filePath(QStringLiteral("plan.json"));
  ASSERT_TRUE(w.layoutsView()->savePlanJson(path));
  EXPECT_GT(QFileInfo(path).size(), 1000);
  EXPECT_FALSE(w.layoutsView()->savePlanJson(QStringLiteral("/nonexistent/dir/plan.json")));
  EXPECT_FALSE(w.layoutsView()->errorLabel()->isHidden());
}

TEST(GuiTopology, EditsProduceTheParsedCluster) {
  app();
  MainWindow w;
  TopologyView* t = w.topologyView();
  t->nodesSpin()->setValue(4);
  t->nvlinkBandwidthSpin()->setValue(900.0);
  ASSERT_TRUE(t->errorLabel()->isHidden()) << t->errorLabel()->text().toStdString();
  const auto& c = w.session()->cluster();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->num_gpus(), 32);
  EXPECT_EQ(c->info().num_nodes, 4);
  // The same cluster the parser builds from the bundled file with the two keys changed.
  auto base = planner::load_cluster(planner::kDefaultCluster);
  ASSERT_TRUE(base);
  nlohmann::json j = w.session()->clusterJson();
  EXPECT_EQ(j.at("nodes"), 4);
  EXPECT_EQ(j.at("intra_node").at("bandwidth_gb_per_s"), 900.0);
  auto expected = planner::parse_cluster(j, base->info().source);
  ASSERT_TRUE(expected);
  ASSERT_EQ(c->num_links(), expected->num_links());
  for (int i = 0; i < c->num_links(); ++i) {
    EXPECT_EQ(c->link(i).bandwidth, expected->link(i).bandwidth);
    EXPECT_EQ(c->link(i).latency, expected->link(i).latency);
    EXPECT_EQ(c->link_name(i), expected->link_name(i));
  }
  EXPECT_DOUBLE_EQ(c->link(0).bandwidth, 900e9);
  // GPUs, NVSwitches, NICs and rails are drawn.
  EXPECT_GT(t->scene()->items().size(), 32 + 4 + 32 + 8);
  w.waitForIdle();
  EXPECT_EQ(w.session()->plan()->num_gpus, 32);
}

TEST(GuiTopology, InvalidEditShowsWhyInPlaceAndKeepsTheCluster) {
  app();
  MainWindow w;
  TopologyView* t = w.topologyView();
  t->nvlinkDomainSpin()->setValue(6);
  EXPECT_FALSE(t->errorLabel()->isHidden());
  EXPECT_TRUE(t->errorLabel()->text().contains(QStringLiteral("nvlink_domain_gpus")));
  EXPECT_EQ(w.session()->cluster()->info().nvlink_domain_gpus, 8);
  t->nvlinkDomainSpin()->setValue(16);  // two nodes in one NVLink domain: valid
  EXPECT_TRUE(t->errorLabel()->isHidden());
  EXPECT_EQ(w.session()->cluster()->info().nvlink_domain_gpus, 16);
  EXPECT_FALSE(t->openCluster(QStringLiteral("/nonexistent/cluster.json")));
  EXPECT_FALSE(t->errorLabel()->isHidden());
}

TEST(GuiTopology, ExplicitFormIsDrawnAndEditedInItsFile) {
  app();
  MainWindow w;
  QTemporaryDir dir;
  const QString path = dir.filePath(QStringLiteral("chain.json"));
  QFile f(path);
  ASSERT_TRUE(f.open(QIODevice::WriteOnly));
  f.write(R"({"name": "chain", "device": "h100",
    "vertices": [{"name": "a", "kind": "gpu"}, {"name": "s", "kind": "switch"},
                 {"name": "b", "kind": "gpu"}],
    "edges": [{"from": "a", "to": "s", "bandwidth_gb_per_s": 100, "latency_us": 1},
              {"from": "s", "to": "b", "bandwidth_gb_per_s": 25, "latency_us": 3}]})");
  f.close();
  TopologyView* t = w.topologyView();
  ASSERT_TRUE(t->openCluster(path)) << t->errorLabel()->text().toStdString();
  EXPECT_EQ(w.session()->cluster()->num_gpus(), 2);
  EXPECT_FALSE(t->nodesSpin()->isEnabled());
  // Two GPUs, one switch, two links.
  EXPECT_GE(t->scene()->items().size(), 5);
}

TEST(GuiTopology, SelectedLayoutColoursGpusByRank) {
  app();
  MainWindow w;
  w.waitForIdle();
  const planner::LayoutCost* lc = w.session()->selectedLayoutCost();
  ASSERT_NE(lc, nullptr);
  // Every GPU of the layout is labelled with its EP and TP rank.
  int labelled = 0;
  for (QGraphicsItem* item : w.topologyView()->scene()->items()) {
    if (auto* text = dynamic_cast<QGraphicsSimpleTextItem*>(item)) {
      labelled += text->text().startsWith(QStringLiteral("E")) ? 1 : 0;
    }
  }
  EXPECT_EQ(labelled, lc->layout.num_gpus);
}

TEST(GuiTopology, SavedClusterLoadsBackEqual) {
  app();
  MainWindow w;
  w.topologyView()->nodesSpin()->setValue(3);
  QTemporaryDir dir;
  const QString path = dir.filePath(QStringLiteral("c.json"));
  ASSERT_TRUE(w.topologyView()->saveCluster(path));
  auto back = planner::load_cluster(path.toStdString());
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->num_gpus(), 24);
}

TEST(GuiLoadBalance, FiguresEqualThePlacementMetrics) {
  app();
  MainWindow w;
  ASSERT_TRUE(w.loadLoad(QString::fromLatin1(kSkewed)));
  w.session()->setPolicy(planner::PlacementPolicy::kContiguous, planner::Redundancy::per_rank(1));
  w.waitForIdle();
  LoadView* v = w.loadView();
  const BalanceOutcome& out = v->outcome();
  ASSERT_TRUE(out.error.isEmpty()) << out.error.toStdString();
  const planner::LayoutCost* lc = w.session()->selectedLayoutCost();
  ASSERT_NE(lc, nullptr);
  EXPECT_EQ(out.epSize, lc->layout.ep_size);
  const auto& load = w.session()->load()->load;
  ASSERT_EQ(out.policies, LoadView::comparedPolicies());
  for (std::size_t p = 0; p < out.policies.size(); ++p) {
    planner::PolicyFit fit = w.session()->policyFit();
    fit.policy = out.policies[p];
    auto placed = planner::place_for_ep(load, fit, out.epSize);
    ASSERT_TRUE(placed) << placed.error().message;
    EXPECT_EQ(out.placements[p].placement.physical_to_logical,
              placed->placement.physical_to_logical);
    auto fig = planner::balance_figures(load, placed->placement);
    ASSERT_TRUE(fig);
    EXPECT_EQ(out.figures[p].balancedness, fig->balancedness);
    EXPECT_EQ(out.figures[p].layer_balancedness, fig->layer_balancedness);
    for (int l = 0; l < load.num_layers(); ++l) {
      EXPECT_EQ(
          out.gpuLoads[p][static_cast<std::size_t>(l)],
          planner::gpu_loads(load.counts[static_cast<std::size_t>(l)],
                             placed->placement.physical_to_logical[static_cast<std::size_t>(l)],
                             out.epSize));
    }
  }
  // eplb balances the skewed load better than contiguous.
  EXPECT_GT(out.figures[1].balancedness, out.figures[0].balancedness);
  // The bars of layer 2 are the GPU loads; the heat maps hold the eplb placement's figures.
  v->layerSpin()->setValue(2);
  auto* bars = qobject_cast<QBarSeries*>(v->gpuLoadChart()->chart()->series().at(0));
  ASSERT_NE(bars, nullptr);
  for (int g = 0; g < out.epSize; ++g) {
    EXPECT_DOUBLE_EQ(bars->barSets().at(1)->at(g), out.gpuLoads[1][2][static_cast<std::size_t>(g)]);
  }
  EXPECT_EQ(v->layerHeatMap()->values(), out.gpuLoads[1]);
  const auto& em = v->expertHeatMap()->values();
  ASSERT_EQ(static_cast<int>(em.size()), load.num_experts);
  for (int g = 0; g < out.epSize; ++g) {
    double sum = 0.0;
    for (const auto& row : em) sum += row[static_cast<std::size_t>(g)];
    EXPECT_NEAR(sum, out.gpuLoads[1][2][static_cast<std::size_t>(g)], 1e-9 * (1.0 + sum));
  }
  QTemporaryDir dir;
  const QString path = dir.filePath(QStringLiteral("placement.json"));
  ASSERT_TRUE(v->savePlacement(path));
  auto file = planner::load_placement_file(path.toStdString());
  ASSERT_TRUE(file) << file.error().message;
  EXPECT_EQ(file->result.placement.physical_to_logical,
            out.placements[1].placement.physical_to_logical);
}

TEST(GuiTraffic, HeatMapIsTheLayerTrafficOfTheSelectedLayout) {
  app();
  MainWindow w;
  w.waitForIdle();
  const planner::LayoutCost* lc = w.session()->selectedLayoutCost();
  ASSERT_NE(lc, nullptr);
  const auto& s = *w.session();
  const planner::RooflineCosts costs(*s.cluster());
  const planner::CostContext ctx{*s.model(),   *s.cluster(),   costs,
                                 s.workload(), s.load()->load, s.placementFn()};
  auto m = planner::layer_traffic(ctx, lc->layout, 0);
  ASSERT_TRUE(m);
  EXPECT_EQ(w.trafficView()->heatMap()->values(), *m);
  EXPECT_TRUE(w.trafficView()->errorLabel()->isHidden());
}

TEST(GuiErrors, ShownInTheViewThatCausedThem) {
  app();
  MainWindow w;
  EXPECT_FALSE(w.loadLoad(QStringLiteral("powerlaw:alpha=banana")));
  EXPECT_FALSE(w.loadErrorLabel()->isHidden());
  EXPECT_FALSE(w.loadErrorLabel()->text().isEmpty());
  EXPECT_FALSE(w.loadLoad(QStringLiteral("/nonexistent/load.csv")));
  EXPECT_TRUE(w.loadErrorLabel()->text().contains(QStringLiteral("/nonexistent/load.csv")));
  EXPECT_TRUE(w.topologyView()->errorLabel()->isHidden());
  EXPECT_TRUE(w.layoutsView()->errorLabel()->isHidden());
  EXPECT_TRUE(w.loadLoad(QStringLiteral("uniform")));
  EXPECT_TRUE(w.loadErrorLabel()->isHidden());
}

TEST(GuiSession, CancelKeepsThePreviousPlan) {
  app();
  MainWindow w;
  w.waitForIdle();
  const auto before = w.session()->plan();
  ASSERT_NE(before, nullptr);
  QSignalSpy cancelled(w.session(), &Session::planCancelled);
  w.session()->replan();
  w.session()->cancel();
  w.waitForIdle();
  EXPECT_EQ(cancelled.count(), 1);
  EXPECT_EQ(w.session()->plan(), before);
}

TEST(GuiLoadBalance, RebalancingOverTimeIsTheLibrarysSimulation) {
  app();
  MainWindow w;
  ASSERT_TRUE(w.loadModel(QStringLiteral("deepseek-v2-lite")));
  const QString steps = QString::fromStdString(
      (moeplan::resource_dir() / "loads" / "dsv2lite_esft_steps16.npy").string());
  ASSERT_TRUE(w.loadLoad(steps));
  w.waitForIdle();
  LoadView* v = w.loadView();
  const BalanceOutcome& out = v->outcome();
  ASSERT_TRUE(out.error.isEmpty()) << out.error.toStdString();
  ASSERT_TRUE(out.rebalance.has_value()) << out.rebalanceError.toStdString();
  const planner::LayoutCost* lc = w.session()->selectedLayoutCost();
  ASSERT_NE(lc, nullptr);
  // The same simulation through the library: eplb, N and W in {1, 2, 4, 8}.
  const auto& s = *w.session();
  auto setup = planner::make_cost_setup(*s.cluster(), s.costDb().toStdString());
  ASSERT_TRUE(setup);
  planner::PolicyFit fit = s.policyFit();
  fit.policy = planner::PlacementPolicy::kEplb;
  planner::RebalanceRequest req;
  req.config = planner::policy_config(fit, s.model()->num_experts, lc->layout.ep_size);
  req.every = req.windows = LoadView::rebalanceGrid();
  const planner::ExpertLoad none;
  const planner::CostContext ctx{*s.model(),   *s.cluster(), setup->costs(),
                                 s.workload(), none,         nullptr};
  auto r =
      planner::simulate_rebalancing(s.load()->steps, s.load()->load.source, ctx, lc->layout, req);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(out.rebalance->schemes.size(), r->schemes.size());
  EXPECT_EQ(out.rebalance->recommended, r->recommended);
  for (std::size_t i = 0; i < r->schemes.size(); ++i) {
    EXPECT_EQ(out.rebalance->schemes[i].series_step_seconds, r->schemes[i].series_step_seconds);
    EXPECT_EQ(out.rebalance->schemes[i].bytes_moved, r->schemes[i].bytes_moved);
  }
  // The chart: the fixed placement's per-step time from the first scored step on, in ms.
  EXPECT_FALSE(v->rebalanceChart()->isHidden());
  const auto series = v->rebalanceChart()->chart()->series();
  ASSERT_EQ(series.size(), 2);
  auto* fixed = qobject_cast<QLineSeries*>(series.at(0));
  ASSERT_NE(fixed, nullptr);
  ASSERT_EQ(fixed->count(), 16 - r->first_scored);
  for (int t = 0; t < fixed->count(); ++t) {
    EXPECT_DOUBLE_EQ(fixed->at(t).x(), r->first_scored + t);
    EXPECT_DOUBLE_EQ(fixed->at(t).y(),
                     1e3 * r->schemes[0].series_step_seconds[static_cast<std::size_t>(t)]);
  }
  EXPECT_TRUE(v->rebalanceLabel()->text().contains(QStringLiteral("recommended")));
  // A load without steps has no time series.
  ASSERT_TRUE(w.loadLoad(QString::fromLatin1(kSkewed)));
  w.waitForIdle();
  EXPECT_FALSE(v->outcome().rebalance.has_value());
  EXPECT_TRUE(v->rebalanceChart()->isHidden());
}

TEST(GuiLoadBalance, CancelKeepsThePreviousFigures) {
  app();
  MainWindow w;
  w.waitForIdle();
  LoadView* v = w.loadView();
  const auto before = v->outcome().placements.front().placement.physical_to_logical;
  v->recompute();
  EXPECT_TRUE(v->busy());
  v->cancel();
  v->waitForIdle();
  EXPECT_FALSE(v->busy());
  EXPECT_EQ(v->outcome().placements.front().placement.physical_to_logical, before);
}

// The time objective: best-time is the library's search on predicted time for the selected
// layout, from the view's own eplb and best maps, on the steps `moeplan place --objective time`
// draws; every placement's predicted time is mean_moe_seconds on steps none of them saw; the
// heat maps and the placement file offer it; unchecked, the view is as before.
TEST(GuiLoadBalance, TimeObjectiveIsTheLibrarysSearchOnPredictedTime) {
  app();
  MainWindow w;
  ASSERT_TRUE(w.loadLoad(QString::fromLatin1(kSkewed)));
  w.waitForIdle();
  LoadView* v = w.loadView();
  ASSERT_EQ(v->outcome().names.size(), 3);
  EXPECT_TRUE(v->timeLabel()->isHidden());
  v->timeObjectiveCheck()->setChecked(true);  // recomputes
  EXPECT_TRUE(v->busy());
  w.waitForIdle();
  const BalanceOutcome& out = v->outcome();
  ASSERT_TRUE(out.error.isEmpty()) << out.error.toStdString();
  ASSERT_TRUE(out.timeError.isEmpty()) << out.timeError.toStdString();
  ASSERT_EQ(out.names, (QStringList{QStringLiteral("contiguous"), QStringLiteral("eplb"),
                                    QStringLiteral("best"), QStringLiteral("best-time")}));
  ASSERT_TRUE(out.timeSearch.has_value());
  ASSERT_EQ(out.placements.size(), 4U);
  // The same search through the library.
  const auto& s = *w.session();
  const planner::LayoutCost* lc = s.selectedLayoutCost();
  ASSERT_NE(lc, nullptr);
  auto setup = planner::make_cost_setup(*s.cluster(), s.costDb().toStdString());
  ASSERT_TRUE(setup);
  const planner::ExpertLoad none;
  const planner::CostContext ctx{*s.model(),   *s.cluster(), setup->costs(),
                                 s.workload(), none,         nullptr};
  const auto& load = s.load()->load;
  const std::int64_t pairs = static_cast<std::int64_t>(lc->layout.ep_size) * lc->layout.tp_size *
                             s.workload().tokens_per_gpu * s.model()->num_experts_per_tok;
  const planner::RefineSteps drawn = planner::draw_refine_steps(load, pairs, s.policyFit().seed);
  auto r = planner::search_placement_by_time(ctx, lc->layout, out.placements[1].placement,
                                             out.placements[2].placement, drawn.search, drawn.check,
                                             load.source);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(out.placements[3].placement.physical_to_logical, r->placement.physical_to_logical);
  EXPECT_EQ(out.placements[3].placement.policy, planner::kTimeSearchPolicy);
  EXPECT_EQ(out.timeSearch->moves_kept, r->report.moves_kept);
  EXPECT_EQ(out.timeSearch->result_check_seconds, r->report.result_check_seconds);
  // Never slower than EPLB's map on the check steps.
  EXPECT_LE(out.timeSearch->result_check_seconds, out.timeSearch->eplb_check_seconds);
  const auto unseen =
      planner::draw_eval_steps(load, LoadView::kTimedSteps, pairs, s.policyFit().seed);
  ASSERT_EQ(out.predictedSeconds.size(), 4U);
  EXPECT_EQ(out.timedSteps, LoadView::kTimedSteps);
  EXPECT_EQ(out.timeCosts.toStdString(), setup->costs().name());
  for (std::size_t p = 0; p < 4; ++p) {
    auto mean =
        planner::mean_moe_seconds(ctx, lc->layout, out.placements[p].placement, unseen, "load");
    ASSERT_TRUE(mean) << mean.error().message;
    EXPECT_DOUBLE_EQ(out.predictedSeconds[p], *mean)
        << out.names[static_cast<int>(p)].toStdString();
    EXPECT_TRUE(v->timeLabel()->text().contains(QStringLiteral("%1 <b>%2 ms</b>")
                                                    .arg(out.names[static_cast<int>(p)])
                                                    .arg(1e3 * out.predictedSeconds[p], 0, 'f', 3)))
        << v->timeLabel()->text().toStdString();
  }
  EXPECT_FALSE(v->timeLabel()->isHidden());
  // The heat maps and the placement file offer best-time.
  ASSERT_EQ(v->policyCombo()->count(), 4);
  EXPECT_EQ(v->policyCombo()->itemText(3), QStringLiteral("best-time"));
  v->policyCombo()->setCurrentIndex(3);
  EXPECT_EQ(v->layerHeatMap()->values(), out.gpuLoads[3]);
  QTemporaryDir dir;
  const QString path = dir.filePath(QStringLiteral("best_time.json"));
  ASSERT_TRUE(v->savePlacement(path));
  auto file = planner::load_placement_file(path.toStdString());
  ASSERT_TRUE(file) << file.error().message;
  EXPECT_EQ(file->result.placement.physical_to_logical,
            out.placements[3].placement.physical_to_logical);
  // Unchecked: the three policies again, no times; the heat maps keep a policy they offer.
  v->timeObjectiveCheck()->setChecked(false);
  w.waitForIdle();
  EXPECT_EQ(v->outcome().names.size(), 3);
  EXPECT_TRUE(v->outcome().predictedSeconds.empty());
  EXPECT_TRUE(v->timeLabel()->isHidden());
  EXPECT_EQ(v->policyCombo()->count(), 3);
  // Checked and cancelled at once: the figures shown stay.
  v->timeObjectiveCheck()->setChecked(true);
  v->cancel();
  v->waitForIdle();
  EXPECT_EQ(v->outcome().names.size(), 3);
}

TEST(GuiViews, SettingsRememberTheLastFiles) {
  app();
  QCoreApplication::setOrganizationName(QStringLiteral("moeplan-gui-test"));
  QSettings().clear();
  {
    MainWindow w(nullptr, true);
    ASSERT_TRUE(w.loadModel(QStringLiteral("mixtral-8x7b")));
    ASSERT_TRUE(w.loadCluster(QStringLiteral("1x-hgx-h200")));
    ASSERT_TRUE(w.loadLoad(QString::fromLatin1(kSkewed)));
    w.close();
  }
  MainWindow again(nullptr, true);
  EXPECT_EQ(again.session()->model()->name, "mixtral-8x7b");
  EXPECT_EQ(again.session()->cluster()->name(), "1x-hgx-h200");
  EXPECT_EQ(again.session()->load()->load.source, kSkewed);
  MainWindow plain;  // without settings: the defaults
  EXPECT_EQ(plain.session()->model()->name, models::kDefaultModel);
  QSettings().clear();
}

TEST(GuiViews, ScreenshotsOfEveryView) {
  app();
  MainWindow w;
  w.resize(1366, 768);
  w.show();
  QTemporaryDir dir;
  ASSERT_EQ(w.saveScreenshots(dir.path()), 7);
  for (const char* name :
       {"model", "topology", "layouts", "load_balance", "traffic", "profiling", "serving"}) {
    const QFileInfo png(QDir(dir.path()).filePath(QString::fromLatin1(name) + ".png"));
    EXPECT_TRUE(png.exists()) << name;
    EXPECT_GT(png.size(), 10000) << name;
  }
}

}  // namespace
}  // namespace test_views
}  // namespace moeplan::gui
