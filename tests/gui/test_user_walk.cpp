// The app as a user meets it (issue #23), under QT_QPA_PLATFORM=offscreen, driven with QTest key
// and mouse events where a user would type or click: heat maps that are never blank, state
// that follows the inputs, warnings in the header, mnemonics, window geometry and persisted
// choices, chart labels.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFontMetrics>
#include <QGraphicsView>
#include <QGuiApplication>
#include <QHelpEvent>
#include <QImage>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QTabWidget>
#include <QTest>
#include <QToolTip>
#include <QWheelEvent>

#include <QAbstractAxis>
#include <QAbstractButton>
#include <QAction>
#include <QBarCategoryAxis>
#include <QChart>
#include <QChartView>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QGraphicsLineItem>
#include <QGraphicsRectItem>
#include <QGraphicsScene>
#include <QHeaderView>
#include <QLegend>
#include <QMenu>
#include <QMenuBar>
#include <QScreen>
#include <QScrollBar>
#include <QSettings>
#include <QStatusBar>
#include <QTableView>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTextDocument>
#include <map>
#include <set>

#include "app/gui/charts.hpp"
#include "app/gui/export_dialog.hpp"
#include "app/gui/layouts_view.hpp"
#include "app/gui/load_view.hpp"
#include "app/gui/main_window.hpp"
#include "app/gui/plan_table_model.hpp"
#include "app/gui/session.hpp"
#include "app/gui/topology_view.hpp"
#include "models/resources.hpp"
#include "planner/topology/cluster.hpp"
#include "tests/gui/gui_app.hpp"
#include "tests/gui/tiny_profile.hpp"

namespace moeplan::gui {
namespace test_user_walk {
namespace {

/// The colour a grab() of `map` shows at the centre of cell (r, c).
QColor pixelOf(HeatMap* map, const QImage& image, int r, int c) {
  const QPoint at = map->cellRect(r, c).center() * image.devicePixelRatio();
  return image.pixelColor(at);
}

/// Every cell's drawn colour is the colour of its value; zero cells have zero's colour, the
/// others are neither white nor zero's colour.
void expectDrawnAsValues(HeatMap* map) {
  const QImage image = map->grab().toImage();
  const auto& v = map->values();
  ASSERT_FALSE(v.empty());
  for (int r = 0; r < static_cast<int>(v.size()); ++r) {
    for (int c = 0; c < static_cast<int>(v[0].size()); ++c) {
      const double x = v[static_cast<std::size_t>(r)][static_cast<std::size_t>(c)];
      const QColor drawn = pixelOf(map, image, r, c);
      EXPECT_EQ(drawn, map->colourOf(x)) << "cell " << r << "," << c;
      if (x == 0.0) {
        EXPECT_EQ(drawn, HeatMap::zeroColour());
      } else {
        EXPECT_NE(drawn, QColor(Qt::white)) << "cell " << r << "," << c << " = " << x;
        EXPECT_NE(drawn, HeatMap::zeroColour()) << "cell " << r << "," << c << " = " << x;
      }
    }
  }
}

TEST(GuiHeatMaps, UniformLoadDrawsANonBlankTrafficMap) {
  app();
  MainWindow w;
  w.resize(1366, 768);
  w.show();
  // One node: the recommended layout is ep8×tp1 a2av, whose uniform-load all-to-all loads every
  // pair alike (on two nodes deepep_normal is recommended; its two hops are not all-to-all).
  ASSERT_TRUE(w.loadCluster(QStringLiteral("1x-hgx-h200")));
  w.waitForIdle();
  w.tabs()->setCurrentWidget(w.trafficView());
  QApplication::processEvents();
  HeatMap* map = w.trafficView()->heatMap();
  const auto& v = map->values();
  ASSERT_EQ(v.size(), 8u);
  // Uniform load: every pair of GPUs carries the same bytes, the diagonal none.
  EXPECT_GT(v[0][1], 0.0);
  EXPECT_EQ(v[0][0], 0.0);
  EXPECT_EQ(map->rangeLow(), map->rangeHigh()) << "one value: one colour, no range";
  expectDrawnAsValues(map);
  const QImage image = map->grab().toImage();
  EXPECT_EQ(pixelOf(map, image, 0, 1), pixelOf(map, image, 5, 2)) << "all equal, one colour";
  EXPECT_NE(pixelOf(map, image, 0, 1), pixelOf(map, image, 0, 0));
  // Hovering a cell shows its value.
  const QPoint at = map->cellRect(0, 1).center();
  QTest::mouseMove(map, at);
  QHelpEvent help(QEvent::ToolTip, at, map->mapToGlobal(at));
  QApplication::sendEvent(map, &help);
  EXPECT_EQ(QToolTip::text(), map->cellText(0, 1));
  EXPECT_TRUE(map->cellText(0, 1).contains(formatBytes(v[0][1])))
      << map->cellText(0, 1).toStdString();
  QToolTip::hideText();
}

TEST(GuiHeatMaps, UniformLoadDrawsNonBlankLoadBalanceMaps) {
  app();
  MainWindow w;
  w.resize(1366, 768);
  w.show();
  w.waitForIdle();
  w.tabs()->setCurrentWidget(w.loadView());
  QApplication::processEvents();
  expectDrawnAsValues(w.loadView()->layerHeatMap());
  expectDrawnAsValues(w.loadView()->expertHeatMap());
  const QImage image = w.loadView()->layerHeatMap()->grab().toImage();
  EXPECT_NE(pixelOf(w.loadView()->layerHeatMap(), image, 0, 0), QColor(Qt::white));
}

TEST(GuiHeatMaps, SmallestNonZeroIsNotWhiteAndPoliciesShareAScale) {
  app();
  MainWindow w;
  w.resize(1366, 768);
  w.show();
  ASSERT_TRUE(w.loadLoad(QStringLiteral("powerlaw:alpha=1.2,shuffle=1")));
  ASSERT_TRUE(w.setPlacement(QStringLiteral("eplb"), 1));
  w.waitForIdle();
  w.tabs()->setCurrentWidget(w.loadView());
  QApplication::processEvents();
  LoadView* lv = w.loadView();
  HeatMap* layer = lv->layerHeatMap();
  HeatMap* expert = lv->expertHeatMap();
  expectDrawnAsValues(layer);
  expectDrawnAsValues(expert);
  // The expert map has zero cells (experts not on a rank) and non-zero ones.
  double smallest = 1e300;
  for (const auto& row : expert->values()) {
    for (double x : row) {
      if (x > 0.0) smallest = std::min(smallest, x);
    }
  }
  EXPECT_NE(expert->colourOf(smallest), QColor(Qt::white));
  EXPECT_NE(expert->colourOf(smallest), HeatMap::zeroColour());
  // Each policy on its own scale, then one scale for all: switching the policy keeps it.
  QTest::mouseClick(lv->sharedScaleCheck(), Qt::LeftButton);
  ASSERT_TRUE(lv->sharedScaleCheck()->isChecked());
  const double lo = layer->rangeLow(), hi = layer->rangeHigh();
  const double ehi = expert->rangeHigh();
  lv->policyCombo()->setFocus();
  QTest::keyClick(lv->policyCombo(), Qt::Key_Home);  // contiguous
  EXPECT_EQ(lv->policyCombo()->currentIndex(), 0);
  EXPECT_EQ(layer->rangeLow(), lo);
  EXPECT_EQ(layer->rangeHigh(), hi);
  EXPECT_EQ(expert->rangeHigh(), ehi);
  // Contiguous is the least balanced: its largest GPU load is the shared maximum.
  double contiguousMax = 0.0;
  for (const auto& row : layer->values()) {
    for (double x : row) contiguousMax = std::max(contiguousMax, x);
  }
  EXPECT_EQ(hi, contiguousMax);
  QTest::keyClick(lv->policyCombo(), Qt::Key_Down);  // eplb
  double eplbMax = 0.0;
  for (const auto& row : layer->values()) {
    for (double x : row) eplbMax = std::max(eplbMax, x);
  }
  EXPECT_LT(eplbMax, hi) << "eplb's own maximum is below the shared one";
  EXPECT_EQ(layer->rangeHigh(), hi);
  // Unchecked: each map on its own range again.
  QTest::mouseClick(lv->sharedScaleCheck(), Qt::LeftButton);
  EXPECT_EQ(layer->rangeHigh(), eplbMax);
}

/// Types `value` into a spin box and presses Enter.
template <typename Spin>
void typeInto(Spin* spin, const QString& value) {
  spin->setFocus();
  QTest::keyClick(spin, Qt::Key_A, Qt::ControlModifier);
  QTest::keyClicks(spin, value);
  QTest::keyClick(spin, Qt::Key_Return);
}

/// Sets a combo box to `text` with the keyboard.
void chooseByKeys(QComboBox* combo, const QString& text) {
  combo->setFocus();
  QTest::keyClick(combo, Qt::Key_Home);
  for (int i = 0; i < combo->count() && combo->currentText() != text; ++i) {
    QTest::keyClick(combo, Qt::Key_Down);
  }
  ASSERT_EQ(combo->currentText(), text);
}

/// Clicks row `row` of a table view.
void clickRow(QTableView* table, int row) {
  const QRect cell = table->visualRect(table->model()->index(row, 1));
  QTest::mouseClick(table->viewport(), Qt::LeftButton, {}, cell.center());
}

TEST(GuiTopology, FatTreeDrawsItsSpineAndEveryLinkOfTheLegend) {
  app();
  MainWindow w;
  w.resize(1366, 768);
  w.show();
  TopologyView* t = w.topologyView();
  chooseByKeys(t->networkCombo(), QStringLiteral("fat_tree"));
  const auto& cluster = *w.session()->cluster();
  ASSERT_EQ(cluster.info().num_nodes, 2);
  // The planner's graph: two leaves and a core switch; every cable is a line in the scene.
  int switches = 0;
  const auto& g = cluster.graph();
  for (std::size_t v = 0; v < boost::num_vertices(g); ++v) {
    if (g[v].kind == planner::VertexKind::kSwitch) ++switches;
  }
  EXPECT_EQ(switches, 3);
  int drawnSwitches = 0, lines = 0, coreLines = 0;
  std::set<QString> drawnBandwidths;
  for (QGraphicsItem* item : t->scene()->items()) {
    if (auto* r = dynamic_cast<QGraphicsRectItem*>(item)) {
      if (r->toolTip().endsWith(QStringLiteral("(switch)"))) ++drawnSwitches;
    }
    if (auto* l = dynamic_cast<QGraphicsLineItem*>(item)) {
      ++lines;
      if (l->toolTip().startsWith(QStringLiteral("core ")) ||
          l->toolTip().contains(QStringLiteral(" core:"))) {
        ++coreLines;
      }
      drawnBandwidths.insert(l->toolTip().section(QStringLiteral(": "), 1).section(',', 0, 0));
    }
  }
  EXPECT_EQ(drawnSwitches, 3);
  EXPECT_EQ(coreLines, 2) << "each leaf reaches the core";
  EXPECT_EQ(lines, static_cast<int>(boost::num_edges(g)) / 2) << "one line per cable";
  EXPECT_EQ(drawnBandwidths.count(QStringLiteral("400 GB/s")), 1u);
}

TEST(GuiStaleState, OpenedConfigIsNamedInTheModelBox) {
  app();
  MainWindow w;
  const QString path =
      QString::fromStdString((resource_dir() / "models/mixtral-8x7b.json").string());
  ASSERT_TRUE(w.loadModel(path));
  EXPECT_EQ(w.modelCombo()->currentText(), path);
  // A bad config.json: the figures and the plan stay those of the model loaded, and say so.
  const int rows = w.modelTable()->rowCount();
  EXPECT_FALSE(w.loadModel(QStringLiteral("/nonexistent/config.json")));
  EXPECT_EQ(w.modelTable()->rowCount(), rows);
  EXPECT_EQ(w.modelCombo()->currentText(), path);
  EXPECT_TRUE(w.errorLabel()->text().contains(QStringLiteral("still those of mixtral-8x7b")))
      << w.errorLabel()->text().toStdString();
  w.waitForIdle();
  EXPECT_EQ(w.session()->plan()->model, "mixtral-8x7b");
  // Choosing a bundled model with the keyboard.
  chooseByKeys(w.modelCombo(), QStringLiteral("qwen3-30b-a3b"));
  QTest::keyClick(w.modelCombo(), Qt::Key_Return);
  QApplication::processEvents();
}

TEST(GuiStaleState, ALoadThatNoLongerFitsStopsThePlanAndSaysSo) {
  app();
  MainWindow w;
  const QString file =
      QString::fromStdString((resource_dir() / "loads/qwen3_30b_a3b_mbolt.json").string());
  ASSERT_TRUE(w.loadModel(QStringLiteral("qwen3-30b-a3b")));
  ASSERT_TRUE(w.loadLoad(file));
  w.waitForIdle();
  ASSERT_TRUE(w.session()->plan() != nullptr);
  ASSERT_TRUE(w.loadModel(QStringLiteral("qwen2-57b-a14b")));
  w.waitForIdle();
  EXPECT_EQ(w.loadEdit()->text(), file);
  EXPECT_FALSE(w.loadErrorLabel()->isHidden());
  EXPECT_TRUE(w.loadErrorLabel()->text().contains(QStringLiteral("does not fit qwen2-57b-a14b")));
  EXPECT_TRUE(w.session()->plan() == nullptr) << "no plan with a load other than the one shown";
  EXPECT_TRUE(w.session()->planError().contains(QStringLiteral("No expert load")));
}

// The context row plans as moeplan plan --isl/--osl/--mem-fraction: each layout's KV cache in its
// memory, the header and memory chart say so, and a bad context is one error naming the field.
TEST(GuiWorkload, ContextCountsTheKvCache) {
  app();
  MainWindow w;
  ASSERT_TRUE(w.loadModel(QStringLiteral("qwen3-30b-a3b")));
  chooseByKeys(w.phaseCombo(), QStringLiteral("decode"));
  w.waitForIdle();
  ASSERT_TRUE(w.session()->plan() != nullptr);
  EXPECT_FALSE(w.session()->plan()->workload.counts_kv());
  EXPECT_TRUE(w.layoutsView()->header()->text().contains(QStringLiteral("excludes the KV cache")));
  typeInto(w.islSpin(), QStringLiteral("1024"));
  w.waitForIdle();
  // Decode needs output tokens: the CLI's message, with the field's label.
  EXPECT_TRUE(w.session()->plan() == nullptr);
  EXPECT_TRUE(w.session()->planError().startsWith(QStringLiteral("Context (output tokens)")))
      << w.session()->planError().toStdString();
  typeInto(w.oslSpin(), QStringLiteral("256"));
  typeInto(w.memFractionSpin(), QStringLiteral("0.80"));
  w.waitForIdle();
  const auto plan = w.session()->plan();
  ASSERT_TRUE(plan != nullptr) << w.session()->planError().toStdString();
  EXPECT_EQ(plan->workload.isl, 1024);
  EXPECT_EQ(plan->workload.osl, 256);
  EXPECT_DOUBLE_EQ(plan->workload.mem_fraction, 0.8);
  for (const auto& l : plan->layouts) {
    EXPECT_GT(l.memory.kv_cache, 0.0);
    EXPECT_DOUBLE_EQ(l.memory_limit, 0.8 * l.memory_capacity);
  }
  EXPECT_TRUE(w.layoutsView()->header()->text().contains(
      QStringLiteral("memory includes the KV cache of a 1024 + 256 token context")));
  EXPECT_TRUE(w.layoutsView()->memoryChart()->chart()->title().contains(
      QStringLiteral("KV cache included")));
  // Input tokens back to 0: no KV cache counted, as before.
  typeInto(w.islSpin(), QStringLiteral("0"));
  w.waitForIdle();
  ASSERT_TRUE(w.session()->plan() != nullptr);
  EXPECT_FALSE(w.session()->plan()->workload.counts_kv());
}

// The latency target of the phase is the CLI's --ttft-ms / --tpot-ms: a layout slower than it
// does not meet it and is not recommended; a target nothing meets leaves no recommendation.
TEST(GuiWorkload, LatencyTargetOfThePhase) {
  app();
  MainWindow w;
  ASSERT_TRUE(w.loadModel(QStringLiteral("qwen3-30b-a3b")));
  chooseByKeys(w.phaseCombo(), QStringLiteral("decode"));
  w.waitForIdle();
  auto plan = w.session()->plan();
  ASSERT_TRUE(plan != nullptr);
  ASSERT_GE(plan->recommended, 0);
  EXPECT_EQ(plan->step_target_s, 0.0);
  // Between the fastest and the slowest feasible layout's step: the slower ones miss it.
  double fastest = 1e30, slowest = 0.0;
  for (const auto& l : plan->layouts) {
    if (!l.feasible) continue;
    fastest = std::min(fastest, l.step_seconds);
    slowest = std::max(slowest, l.step_seconds);
  }
  ASSERT_LT(fastest, slowest);
  const double target_ms = std::round(0.5e3 * (fastest + slowest) * 10.0) / 10.0;
  typeInto(w.targetSpin(), QString::number(target_ms, 'f', 1));
  w.waitForIdle();
  plan = w.session()->plan();
  ASSERT_TRUE(plan != nullptr) << w.session()->planError().toStdString();
  EXPECT_DOUBLE_EQ(plan->step_target_s, target_ms * 1e-3);
  EXPECT_EQ(w.session()->choices().tpot_ms, target_ms);
  EXPECT_FALSE(w.session()->choices().ttft_ms.has_value());
  int missing = 0;
  for (const auto& l : plan->layouts) {
    EXPECT_EQ(l.meets_target, l.step_seconds <= target_ms * 1e-3);
    if (!l.meets_target) ++missing;
  }
  EXPECT_GT(missing, 0);
  ASSERT_GE(plan->recommended, 0);
  EXPECT_TRUE(plan->layouts[static_cast<std::size_t>(plan->recommended)].meets_target);
  // In prefill the same field is the TTFT target.
  chooseByKeys(w.phaseCombo(), QStringLiteral("prefill"));
  w.waitForIdle();
  EXPECT_EQ(w.session()->choices().ttft_ms, target_ms);
  EXPECT_FALSE(w.session()->choices().tpot_ms.has_value());
  // A target nothing meets: no recommendation, and the reason names the target.
  typeInto(w.targetSpin(), QStringLiteral("0.1"));
  w.waitForIdle();
  plan = w.session()->plan();
  ASSERT_TRUE(plan != nullptr);
  EXPECT_EQ(plan->recommended, -1);
  ASSERT_FALSE(plan->reasons.empty());
  EXPECT_NE(plan->reasons.front().find("target"), std::string::npos) << plan->reasons.front();
}

TEST(GuiStaleState, FilteringKeepsTheSelectedLayout) {
  app();
  MainWindow w;
  w.resize(1366, 768);
  w.show();
  w.waitForIdle();
  w.tabs()->setCurrentWidget(w.layoutsView());
  LayoutsView* v = w.layoutsView();
  clickRow(v->table(), 2);
  const int chosen = w.session()->selectedLayout();
  const auto layout = w.session()->selectedLayoutCost()->layout;
  ASSERT_NE(chosen, w.session()->plan()->recommended);
  // A filter that keeps the row: still selected, the table's current row is it.
  const QString own = QString::fromStdString(planner::mapping_name(layout.mapping));
  chooseByKeys(v->mappingFilter(), own);
  EXPECT_EQ(w.session()->selectedLayout(), chosen);
  EXPECT_EQ(v->table()->currentIndex().data(PlanTableModel::kLayoutIndexRole).toInt(), chosen);
  EXPECT_TRUE(v->hiddenNote()->isHidden());
  // A filter that hides it: the selection stays, no other row drives the views, a note says so.
  const QString other = own == QStringLiteral("tp_innermost") ? QStringLiteral("ep_innermost")
                                                              : QStringLiteral("tp_innermost");
  chooseByKeys(v->mappingFilter(), other);
  EXPECT_EQ(w.session()->selectedLayout(), chosen);
  EXPECT_FALSE(v->table()->currentIndex().isValid());
  EXPECT_FALSE(v->hiddenNote()->isHidden());
  EXPECT_TRUE(v->hiddenNote()->text().contains(QString::fromStdString(layout.shape_name())));
  chooseByKeys(v->mappingFilter(), QStringLiteral("all"));
  EXPECT_EQ(w.session()->selectedLayout(), chosen);
  EXPECT_EQ(v->table()->currentIndex().data(PlanTableModel::kLayoutIndexRole).toInt(), chosen);
}

TEST(GuiStaleState, CostSourceNamedInTheChartAndMismatchWarnedInTheHeader) {
  app();
  MainWindow w;
  w.resize(1366, 768);
  w.show();
  w.waitForIdle();
  LayoutsView* v = w.layoutsView();
  w.tabs()->setCurrentWidget(v);
  QApplication::processEvents();
  auto xTitle = [v] {
    return v->breakdownChart()->chart()->axes(Qt::Horizontal).value(0)->titleText();
  };
  // The axis names the source's kind in a title that fits the plot's width at 1366 × 768 (Qt
  // cuts a longer one off); the whole name is the chart's tooltip.
  const QString full = QString::fromStdString(w.session()->plan()->cost_source);
  QChart* chart = v->breakdownChart()->chart();
  const auto fits = [chart](const QString& title) {
    const QFontMetricsF metrics(chart->axes(Qt::Horizontal).value(0)->titleFont());
    return metrics.horizontalAdvance(title) <= chart->plotArea().width();
  };
  EXPECT_EQ(xTitle(), QStringLiteral("ms per MoE layer (roofline-calibrated)"));
  EXPECT_TRUE(fits(xTitle())) << xTitle().toStdString() << " in " << chart->plotArea().width();
  EXPECT_FALSE(fits(QStringLiteral("ms per MoE layer (%1)").arg(full)))
      << "the whole name fits too: " << full.toStdString();
  EXPECT_TRUE(v->breakdownChart()->findChild<QChartView*>()->toolTip().contains(full));
  // Without a DB the Model view says the roofline is calibrated for the H200 and by what.
  const auto costLine = [&w] { return w.costFileLabel()->text(); };
  EXPECT_TRUE(costLine().contains(QStringLiteral("calibrated for this device")))
      << costLine().toStdString();
  EXPECT_TRUE(costLine().contains(full)) << costLine().toStdString();
  {
    // Every line of it shows: the Model view gives the wrapped label the height of its lines.
    w.tabs()->setCurrentIndex(0);
    QApplication::processEvents();
    QLabel* l = w.costFileLabel();
    EXPECT_GT(l->heightForWidth(l->width()), QFontMetrics(l->font()).height() * 3 / 2)
        << "the line no longer wraps at this width: the check below proves nothing";
    EXPECT_GE(l->height(), l->heightForWidth(l->width())) << l->width() << " wide";
    w.tabs()->setCurrentWidget(v);
    QApplication::processEvents();
  }
  EXPECT_TRUE(v->costWarning()->isHidden());
  ASSERT_TRUE(w.loadCosts(QString::fromStdString(tinyProfileDb())));
  w.waitForIdle();
  EXPECT_TRUE(xTitle().contains(QStringLiteral("(measured:"))) << xTitle().toStdString();
  EXPECT_FALSE(xTitle().contains(QLatin1Char('/'))) << xTitle().toStdString();
  EXPECT_TRUE(fits(xTitle())) << xTitle().toStdString();
  // A CPU profile for a 16 × H200 cluster: said in the Layouts header, not in a tooltip.
  EXPECT_FALSE(v->costWarning()->isHidden());
  EXPECT_TRUE(v->costWarning()->text().contains(QStringLiteral("cpu:")));
  EXPECT_TRUE(v->costWarning()->text().contains(QStringLiteral("16 × h200")))
      << v->costWarning()->text().toStdString();
  EXPECT_TRUE(costLine().startsWith(QStringLiteral("Cost DB: "))) << costLine().toStdString();
  ASSERT_TRUE(w.loadCosts(QString()));
  EXPECT_TRUE(v->costWarning()->isHidden());
  w.waitForIdle();
  EXPECT_TRUE(costLine().contains(QStringLiteral("calibrated for this device")))
      << costLine().toStdString();
  // A device with no calibration (the GB200 NVL72's GPU; 16 of its trays, 64 GPUs, where the
  // model has layouts) says so.
  QTemporaryDir tmp;
  const QString rack = tmp.filePath(QStringLiteral("gb200-64.json"));
  {
    QFile f(rack);
    ASSERT_TRUE(f.open(QIODevice::WriteOnly));
    f.write(R"({"name": "gb200-64", "device": "b200", "nodes": 16, "gpus_per_node": 4,
      "nvlink_domain_gpus": 64,
      "intra_node": {"kind": "nvswitch", "bandwidth_gb_per_s": 900, "latency_us": 2.5},
      "inter_node": {"nics_per_node": 4, "nic_bandwidth_gb_per_s": 100, "latency_us": 5.0,
                     "network": "rail_optimized", "oversubscription": 1.0}})");
  }
  ASSERT_TRUE(w.loadCluster(rack));
  w.waitForIdle();
  ASSERT_TRUE(w.session()->plan() != nullptr) << w.session()->planError().toStdString();
  ASSERT_EQ(w.session()->plan()->cost_source, "roofline");
  EXPECT_TRUE(costLine().contains(QStringLiteral("no calibration for this device")))
      << costLine().toStdString();
}

TEST(GuiCharts, ShortCostSourceKeepsTheKindAndTheDatabasesName) {
  EXPECT_EQ(shortCostSource(QStringLiteral(
                "roofline-calibrated (aiconfigurator-core 0.12.0, trtllm 1.3.0rc20)")),
            QStringLiteral("roofline-calibrated"));
  EXPECT_EQ(shortCostSource(QStringLiteral("roofline")), QStringLiteral("roofline"));
  EXPECT_EQ(shortCostSource(QStringLiteral("measured:/tmp/a b/h200.db")),
            QStringLiteral("measured:h200.db"));
  EXPECT_EQ(shortCostSource(QStringLiteral("measured:/tmp/a (1)/h200.db (p10)")),
            QStringLiteral("measured:h200.db (p10)"));
  EXPECT_EQ(shortCostSource(QStringLiteral("measured:local.db")),
            QStringLiteral("measured:local.db"));
}

TEST(GuiStaleState, AnEditedClusterIsNamedAsEditedUntilSaved) {
  app();
  QTemporaryDir tmp;
  MainWindow w;
  w.show();
  TopologyView* t = w.topologyView();
  EXPECT_EQ(t->clusterCombo()->currentText(), QStringLiteral("2x-hgx-h200"));
  typeInto(t->nodesSpin(), QStringLiteral("4"));
  ASSERT_EQ(w.session()->cluster()->info().num_nodes, 4);
  EXPECT_EQ(w.session()->cluster()->name(), "2x-hgx-h200-edited");
  EXPECT_EQ(t->clusterCombo()->currentIndex(), -1);
  EXPECT_TRUE(t->clusterCombo()->placeholderText().contains(QStringLiteral("not saved")));
  EXPECT_EQ(w.session()->cluster()->info().description.rfind("Edited in moeplan-gui from 2x", 0),
            0u);
  w.waitForIdle();
  // An unsaved edit cannot be exported (the export names the cluster file): the dialog says so.
  ExportDialog* d = w.makeExportDialog();
  EXPECT_TRUE(d->messageLabel()->text().contains(QStringLiteral("save it in the Topology view")))
      << d->messageLabel()->text().toStdString();
  d->close();
  // Saved under a name of its own ("mine", .json added), the cluster is that file.
  ASSERT_TRUE(t->saveCluster(tmp.filePath(QStringLiteral("mine"))));
  EXPECT_TRUE(QFileInfo::exists(tmp.filePath(QStringLiteral("mine.json"))));
  EXPECT_EQ(w.session()->cluster()->name(), "mine");
  EXPECT_EQ(w.session()->cluster()->info().source,
            tmp.filePath(QStringLiteral("mine.json")).toStdString());
  EXPECT_TRUE(w.statusBar()->currentMessage().contains(QStringLiteral("mine.json")));
  EXPECT_TRUE(t->clusterCombo()->placeholderText().startsWith(QStringLiteral("mine (")));
}

/// The mnemonic letter of a text ("&&" is a literal "&"), or 0.
QChar mnemonicOf(QString text) {
  text.replace(QStringLiteral("&&"), QString());
  const qsizetype at = text.indexOf(QLatin1Char('&'));
  return at >= 0 && at + 1 < text.size() ? text[at + 1].toUpper() : QChar();
}

TEST(GuiKeyboard, MnemonicsAreUniquePerViewAndReachTheirTargets) {
  app();
  MainWindow w;
  w.resize(1366, 768);
  w.show();
  w.activateWindow();
  ASSERT_TRUE(QTest::qWaitForWindowActive(&w));
  w.waitForIdle();
  // Window-wide letters: the menus and the tabs.
  std::map<QChar, QString> global;
  for (QAction* a : w.menuBar()->actions()) {
    const QChar c = mnemonicOf(a->text());
    ASSERT_FALSE(c.isNull());
    EXPECT_TRUE(global.emplace(c, a->text()).second) << a->text().toStdString();
  }
  for (int i = 0; i < w.tabs()->count(); ++i) {
    const QChar c = mnemonicOf(w.tabs()->tabText(i));
    ASSERT_FALSE(c.isNull());
    EXPECT_TRUE(global.emplace(c, w.tabs()->tabText(i)).second)
        << w.tabs()->tabText(i).toStdString() << " clashes with " << global[c].toStdString();
  }
  // Each view's own letters: distinct, and none of the window-wide ones.
  for (int i = 0; i < w.tabs()->count(); ++i) {
    std::map<QChar, QString> own;
    QWidget* page = w.tabs()->widget(i);
    auto add = [&](const QString& text) {
      const QChar c = mnemonicOf(text);
      if (c.isNull()) return;
      EXPECT_EQ(global.count(c), 0u)
          << text.toStdString() << " clashes with " << global[c].toStdString();
      EXPECT_TRUE(own.emplace(c, text).second)
          << text.toStdString() << " clashes with " << own[c].toStdString() << " on "
          << w.tabs()->tabText(i).toStdString();
    };
    for (QLabel* l : page->findChildren<QLabel*>()) {
      if (l->buddy() != nullptr) {
        add(l->text());
      } else if (!Qt::mightBeRichText(l->text())) {
        // A plain label's "&x" with no buddy is no key: Qt shows the ampersand as typed.
        EXPECT_FALSE(mnemonicOf(l->text()).isLetterOrNumber())
            << l->text().toStdString() << " on " << w.tabs()->tabText(i).toStdString()
            << " has no buddy";
      }
    }
    for (QAbstractButton* b : page->findChildren<QAbstractButton*>()) add(b->text());
  }
  // The View menu names the views as the tabs do.
  QMenu* view = w.menuBar()->actions()[1]->menu();
  EXPECT_EQ(view->actions()[0]->text(), QStringLiteral("Model && workload"));
  // Alt+L and Alt+B reach their tabs, Alt+D on Topology the NVLink domain, Alt+F the File menu.
  QTest::keyClick(&w, Qt::Key_L, Qt::AltModifier);
  EXPECT_EQ(w.tabs()->currentWidget(), w.layoutsView());
  QTest::keyClick(&w, Qt::Key_B, Qt::AltModifier);
  EXPECT_EQ(w.tabs()->currentWidget(), w.loadView());
  QTest::keyClick(&w, Qt::Key_T, Qt::AltModifier);
  EXPECT_EQ(w.tabs()->currentWidget(), w.topologyView());
  QTest::keyClick(&w, Qt::Key_D, Qt::AltModifier);
  QWidget* focus = QApplication::focusWidget();
  EXPECT_TRUE(focus == w.topologyView()->nvlinkDomainSpin() ||
              (focus != nullptr && focus->parent() == w.topologyView()->nvlinkDomainSpin()));
  QTest::keyClick(&w, Qt::Key_F, Qt::AltModifier);
  auto* popup = qobject_cast<QMenu*>(QApplication::activePopupWidget());
  ASSERT_TRUE(popup != nullptr) << "Alt+F opens a menu";
  EXPECT_EQ(popup->title(), QStringLiteral("&File"));
  popup->close();
}

TEST(GuiWindow, GeometryFromALargerScreenIsFittedAndChoicesPersist) {
  app();
  QCoreApplication::setOrganizationName(QStringLiteral("moeplan-gui-test"));
  QSettings().clear();
  const QRect avail = QGuiApplication::primaryScreen()->availableGeometry();
  {
    MainWindow w(nullptr, true);
    w.show();
    // As saved on a screen twice as large, far right and down.
    w.setGeometry(avail.x() + avail.width(), avail.y() + avail.height(), avail.width() * 2,
                  avail.height() * 2);
    chooseByKeys(w.phaseCombo(), QStringLiteral("decode"));
    typeInto(w.tokensSpin(), QStringLiteral("32"));
    ASSERT_TRUE(w.loadLoad(QStringLiteral("powerlaw:alpha=1.2")));
    chooseByKeys(w.placementCombo(), QStringLiteral("eplb"));
    typeInto(w.redundantSpin(), QStringLiteral("2"));
    w.waitForIdle();
    ExportDialog* d = w.makeExportDialog();
    chooseByKeys(d->formatCombo(), QStringLiteral("trtllm"));
    d->folderEdit()->setText(QStringLiteral("/tmp/moeplan-export-here"));
    d->close();
    QApplication::processEvents();
    w.close();
  }
  MainWindow again(nullptr, true);
  again.show();
  QApplication::processEvents();
  // The window fits the smallest screen the app is made for, so it can always be fitted there.
  EXPECT_TRUE(again.minimumSizeHint().width() <= 1366 && again.minimumSizeHint().height() <= 768)
      << again.minimumSizeHint().width() << "×" << again.minimumSizeHint().height();
  // On this screen: shrunk to the room left (never below its minimum size), its frame's top
  // left corner inside, and inside altogether where the minimum size allows.
  const QRect frame = again.frameGeometry();
  EXPECT_LE(again.width(), std::max(avail.width(), again.minimumSizeHint().width()));
  EXPECT_LE(again.height(), std::max(avail.height(), again.minimumSizeHint().height()));
  if (again.minimumSizeHint().width() < avail.width() - 8 &&
      again.minimumSizeHint().height() < avail.height() - 36) {
    EXPECT_TRUE(avail.contains(frame.topLeft())) << frame.x() << "," << frame.y();
    EXPECT_TRUE(avail.contains(frame))
        << frame.x() << "," << frame.y() << " " << frame.width() << "×" << frame.height();
  }
  EXPECT_EQ(again.phaseCombo()->currentText(), QStringLiteral("decode"));
  EXPECT_EQ(again.tokensSpin()->value(), 32);
  EXPECT_EQ(again.placementCombo()->currentText(), QStringLiteral("eplb"));
  EXPECT_EQ(again.redundantSpin()->value(), 2);
  again.waitForIdle();
  EXPECT_EQ(again.session()->plan()->workload.tokens_per_gpu, 32);
  EXPECT_EQ(again.session()->plan()->placement_policy.rfind("eplb", 0), 0u);
  ExportDialog* d = again.makeExportDialog();
  EXPECT_EQ(d->formatCombo()->currentText(), QStringLiteral("trtllm"));
  EXPECT_EQ(d->folderEdit()->text(), QStringLiteral("/tmp/moeplan-export-here"));
  d->close();
  QSettings().clear();
}

TEST(GuiCharts, EveryBarHasRoomForItsLabelAndTheTableFits) {
  app();
  for (const QSize size : {QSize(1366, 768), QSize(1600, 1000)}) {
    MainWindow w;
    w.resize(size);
    w.show();
    w.waitForIdle();
    w.tabs()->setCurrentWidget(w.layoutsView());
    QApplication::processEvents();
    BreakdownChart* b = w.layoutsView()->breakdownChart();
    const int n = b->shownRows();
    EXPECT_GE(n, 3) << size.width();
    auto* y = qobject_cast<QBarCategoryAxis*>(b->chart()->axes(Qt::Vertical).value(0));
    ASSERT_TRUE(y != nullptr);
    EXPECT_EQ(static_cast<int>(y->count()), n);
    // Qt Charts drops a category label that does not fit its band.
    const double band = b->chart()->plotArea().height() / n;
    EXPECT_GE(band, QFontMetrics(b->labelFont()).height()) << size.width();
    const QStringList names = y->categories();
    EXPECT_TRUE(std::any_of(names.begin(), names.end(), [](const QString& c) {
      return c.startsWith(QStringLiteral("1 ep16×tp1 "));
    })) << names.join(QStringLiteral(" | ")).toStdString();
    // The memory chart names the layouts by their plan rank (the table's # column, which the
    // time chart beside it spells out), not by table row; every rank's label fits its bar's band
    // beside the legend, which sits on the right so that each part keeps its name.
    QChart* mem = w.layoutsView()->memoryChart()->chart();
    auto* x = qobject_cast<QBarCategoryAxis*>(mem->axes(Qt::Horizontal).value(0));
    ASSERT_TRUE(x != nullptr);
    QTableView* table = w.layoutsView()->table();
    EXPECT_EQ(x->categories().front(),
              table->model()->index(0, PlanTableModel::kRank).data().toString());
    EXPECT_FALSE(x->truncateLabels());
    const QFontMetrics xm(x->labelsFont());
    const double mem_band = mem->plotArea().width() / x->count();
    for (const QString& c : x->categories()) {
      EXPECT_GE(mem_band, xm.horizontalAdvance(c)) << c.toStdString() << ", " << size.width();
    }
    EXPECT_EQ(mem->legend()->alignment(), Qt::AlignRight);
    if (size.width() >= 1600) {
      EXPECT_EQ(table->horizontalScrollBar()->maximum(), 0)
          << "every column, memory and fits included, without scrolling; window " << w.width()
          << ", table " << table->viewport()->width() << ", columns "
          << table->horizontalHeader()->length();
    }
  }
  // Long category labels are slanted, never cut.
  GroupedBarChart g;
  g.resize(600, 300);
  g.setData(QStringLiteral("t"),
            {QStringLiteral("2x1 a2av"), QStringLiteral("1x2 all_gather"),
             QStringLiteral("2x1 padded_a2a")},
            {QStringLiteral("a")}, {{1.0, 2.0, 3.0}}, QStringLiteral("x"), QStringLiteral("y"));
  auto* gx = qobject_cast<QBarCategoryAxis*>(g.chart()->axes(Qt::Horizontal).value(0));
  ASSERT_TRUE(gx != nullptr);
  EXPECT_FALSE(gx->truncateLabels());
}

TEST(GuiLowItems, SavesNameTheirFilesAndScriptsAreExecutable) {
  app();
  QTemporaryDir tmp;
  MainWindow w;
  w.show();
  w.waitForIdle();
  ASSERT_TRUE(w.layoutsView()->savePlanJson(tmp.filePath(QStringLiteral("plan"))));
  EXPECT_TRUE(QFileInfo::exists(tmp.filePath(QStringLiteral("plan.json"))));
  EXPECT_TRUE(w.statusBar()->currentMessage().contains(QStringLiteral("plan.json")));
  ExportDialog* d = w.makeExportDialog();
  chooseByKeys(d->formatCombo(), QStringLiteral("sglang"));
  d->folderEdit()->setText(tmp.filePath(QStringLiteral("sg")));
  QTest::mouseClick(d->writeButton(), Qt::LeftButton);
  const QFileInfo script(tmp.filePath(QStringLiteral("sg/sglang_launch.sh")));
  ASSERT_TRUE(script.exists());
  EXPECT_TRUE(script.permission(QFileDevice::ExeOwner));
  d->close();
}

TEST(GuiLowItems, MessagesNameTheGuisFields) {
  // The profiler's "exists" error as the Profiling view shows it: its field labels, no flags.
  const QString text =
      errorText(input_error("out", " /x/p.db exists; expected {resume} to measure what it lacks"));
  EXPECT_EQ(text,
            QStringLiteral("Output /x/p.db exists; expected Resume to measure what it lacks"));
}

TEST(GuiLowItems, TopologyShowsZeroGpusAndPlanErrorsInPlaceAndZooms) {
  app();
  MainWindow w;
  w.resize(1366, 768);
  w.show();
  w.activateWindow();
  ASSERT_TRUE(QTest::qWaitForWindowActive(&w));
  w.tabs()->setCurrentWidget(w.topologyView());
  TopologyView* t = w.topologyView();
  typeInto(t->gpusPerNodeSpin(), QStringLiteral("0"));
  EXPECT_EQ(t->gpusPerNodeSpin()->value(), 0) << "not silently reverted";
  EXPECT_FALSE(t->errorLabel()->isHidden());
  EXPECT_TRUE(t->errorLabel()->text().contains(QStringLiteral("gpus_per_node")))
      << t->errorLabel()->text().toStdString();
  EXPECT_EQ(w.session()->cluster()->info().gpus_per_node, 8) << "the last valid cluster stays";
  // 72 GPUs: no legal layout, said in the Topology view itself.
  ASSERT_TRUE(w.loadCluster(QStringLiteral("gb200-nvl72")));
  w.waitForIdle();
  EXPECT_FALSE(t->planErrorLabel()->isHidden());
  EXPECT_TRUE(t->planErrorLabel()->text().contains(QStringLiteral("72")))
      << t->planErrorLabel()->text().toStdString();
  // In the GUI's words: the GPU count is the Topology view's nodes × GPUs per node, no flags.
  EXPECT_TRUE(t->planErrorLabel()->text().contains(QStringLiteral("Nodes × GPUs per node 64")))
      << t->planErrorLabel()->text().toStdString();
  EXPECT_FALSE(t->planErrorLabel()->text().contains(QStringLiteral("--")));
  // Zoom with Ctrl + the mouse wheel, and back to the whole cluster.
  const double fitted = t->zoom();
  QWidget* viewport = t->graphicsView()->viewport();
  const QPointF at = QPointF(viewport->rect().center());
  QWheelEvent wheel(at, viewport->mapToGlobal(at), QPoint(), QPoint(0, 120), Qt::NoButton,
                    Qt::ControlModifier, Qt::NoScrollPhase, false);
  QApplication::sendEvent(viewport, &wheel);
  EXPECT_NEAR(t->zoom(), fitted * 1.25, 1e-9 * fitted);
  t->zoomBy(1.25);
  t->fitAll();
  EXPECT_NEAR(t->zoom(), fitted, 1e-9 * fitted);
}

}  // namespace
}  // namespace test_user_walk
}  // namespace moeplan::gui
