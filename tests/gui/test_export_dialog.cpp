// The export dialog under QT_QPA_PLATFORM=offscreen: it exports the plan on screen (phase,
// tokens, load, placement policy and redundant slots, cost source) and the selected layout,
// its preview is planner/export's text for the same request, it writes the same files as
// `moeplan export`, and errors show in the dialog.
#include <gtest/gtest.h>

#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>

#include "app/gui/export_dialog.hpp"
#include "app/gui/layouts_view.hpp"
#include "app/gui/main_window.hpp"
#include "models/registry.hpp"
#include "models/resources.hpp"
#include "planner/costs/cost_setup.hpp"
#include "planner/layout_figures.hpp"
#include "planner/plan_request.hpp"
#include "profiler/routed_load.hpp"
#include "tests/gui/gui_app.hpp"
#include "tests/gui/tiny_profile.hpp"

namespace moeplan::gui {
namespace test_export_dialog {
namespace {

/// The inputs of the report: qwen3-30b-a3b on 2 × HGX H200, decode, 32 sequences per
/// GPU, a measured load, eplb with one redundant slot per EP rank, a profile DB as cost source.
struct Request {
  std::string model = "qwen3-30b-a3b";
  std::string cluster = planner::kDefaultCluster;
  std::string load = (resource_dir() / "loads/qwen3_30b_a3b_mbolt.json").string();
  std::string phase = "decode";
  int tokens = 32;
  std::string placement = "eplb";
  int redundant = 1;
  std::string costs;
};

/// What the planner library exports for `r`, layout `rank` (1-based), in `format`: the plan
/// `moeplan plan` makes for these choices, and the placement the policy gives that layout's EP
/// size as the placement file.
std::string plannerExport(const Request& r, int rank, planner::ExportFormat format) {
  auto model = models::load_model(r.model);
  EXPECT_TRUE(model.ok());
  auto setup = planner::make_cost_setup(r.cluster, r.costs);
  EXPECT_TRUE(setup.ok()) << setup.error().message;
  const planner::Cluster& cluster = *setup->cluster;
  auto load = profiler::load_any(r.load, &*model);
  EXPECT_TRUE(load.ok()) << load.error().message;
  planner::PlanChoices c;
  c.phase = r.phase;
  c.tokens_per_gpu = r.tokens;
  c.placement = r.placement;
  c.redundancy = planner::Redundancy::per_rank(r.redundant);
  auto req = planner::make_plan_request(*model, cluster, c, load->load, true);
  EXPECT_TRUE(req.ok()) << req.error().message;
  auto plan = planner::make_plan(*model, cluster, setup->costs(), *req);
  EXPECT_TRUE(plan.ok()) << plan.error().message;
  const auto summary = planner::summarize_plan(*plan);
  auto chosen = planner::select_layout(summary, std::to_string(rank));
  EXPECT_TRUE(chosen.ok());
  const int ep = chosen->layout.ep_size;
  const auto fit = planner::policy_fit(*model, cluster, *planner::parse_policy(r.placement),
                                       planner::Redundancy::per_rank(r.redundant), r.tokens);
  auto placed = planner::place_for_ep(load->load, fit, ep);
  EXPECT_TRUE(placed.ok());
  const planner::PlacementFile file{*placed, planner::policy_config(fit, model->num_experts, ep),
                                    load->layer_ids, load->load.source};
  auto spec = planner::make_export_spec(summary, *chosen, *model, cluster, &file, "placement");
  EXPECT_TRUE(spec.ok()) << spec.error().message;
  auto out = planner::export_layout(*spec, format);
  if (!out) return "error: " + out.error().message;
  return planner::export_to_text(*out);
}

/// Sets a combo box to `text` with the keyboard, as a user does (Down until it shows).
void chooseByKeys(QComboBox* combo, const QString& text) {
  combo->setFocus();
  QTest::keyClick(combo, Qt::Key_Home);
  for (int i = 0; i < combo->count() && combo->currentText() != text; ++i) {
    QTest::keyClick(combo, Qt::Key_Down);
  }
  ASSERT_EQ(combo->currentText(), text);
}

/// Types `value` into a spin box and presses Enter.
void typeInto(QSpinBox* spin, int value) {
  spin->setFocus();
  QTest::keyClick(spin, Qt::Key_A, Qt::ControlModifier);
  QTest::keyClicks(spin, QString::number(value));
  QTest::keyClick(spin, Qt::Key_Return);
  ASSERT_EQ(spin->value(), value);
}

/// A main window set to `r` through its widgets.
void enter(MainWindow& w, const Request& r) {
  ASSERT_TRUE(w.loadModel(QString::fromStdString(r.model)));
  ASSERT_TRUE(w.loadLoad(QString::fromStdString(r.load)));
  chooseByKeys(w.phaseCombo(), QString::fromStdString(r.phase));
  typeInto(w.tokensSpin(), r.tokens);
  chooseByKeys(w.placementCombo(), QString::fromStdString(r.placement));
  typeInto(w.redundantSpin(), r.redundant);
  if (!r.costs.empty()) {
    ASSERT_TRUE(w.loadCosts(QString::fromStdString(r.costs)));
  }
  w.waitForIdle();
  ASSERT_TRUE(w.session()->plan() != nullptr) << w.session()->planError().toStdString();
}

TEST(GuiExportDialog, ExportsThePlanOnScreenInEveryFormat) {
  app();
  Request r;
  r.costs = tinyProfileDb();
  MainWindow w;
  w.resize(1366, 768);
  w.show();
  enter(w, r);
  // Select the plan's rank-2 layout by clicking its row in the Layouts table.
  w.tabs()->setCurrentWidget(w.layoutsView());
  QTableView* table = w.layoutsView()->table();
  const QRect cell = table->visualRect(table->model()->index(1, 1));
  QTest::mouseClick(table->viewport(), Qt::LeftButton, {}, cell.center());
  w.waitForIdle();
  const int index = w.session()->selectedLayout();
  ASSERT_GE(index, 0);
  const int rank = index + 1;
  ASSERT_NE(index, w.session()->plan()->recommended) << "the click selected another layout";

  ExportDialog* d = w.makeExportDialog();
  EXPECT_EQ(d->layoutCombo()->currentIndex(), index);
  // The dialog says what it exports.
  const QString inputs = d->inputsLabel()->text();
  for (const char* part : {"qwen3-30b-a3b", "decode", "32 sequences per GPU", "qwen3_30b_a3b_mbolt",
                           "eplb with redundant slots 1 per EP rank", "measured:"}) {
    EXPECT_TRUE(inputs.contains(QString::fromLatin1(part)))
        << part << " in " << inputs.toStdString();
  }
  int checked = 0;
  for (const auto format : planner::kAllExportFormats) {
    const QString name = QString::fromStdString(planner::export_format_name(format));
    chooseByKeys(d->formatCombo(), name);
    const std::string expected = plannerExport(r, rank, format);
    if (expected.rfind("error: ", 0) == 0) {
      EXPECT_TRUE(d->preview()->toPlainText().isEmpty()) << name.toStdString();
      EXPECT_TRUE(
          d->messageLabel()->text().contains(QString::fromStdString(expected.substr(7, 30))))
          << d->messageLabel()->text().toStdString();
    } else {
      EXPECT_EQ(d->preview()->toPlainText().toStdString(), expected) << name.toStdString();
      ++checked;
    }
  }
  EXPECT_GE(checked, 4) << "most formats express this layout";
  // The case: a decode plan's a2av layout gets vLLM's low-latency all-to-all. Which
  // layout ranks where depends on the measured DB (an ASan build measures other times), so the
  // check picks the first EP layout that dispatches with a2av, not a rank.
  const auto& layouts = w.session()->plan()->layouts;
  int a2av = -1;
  for (std::size_t i = 0; i < layouts.size(); ++i) {
    const auto& l = layouts[i].layout;
    if (l.tp_size == 1 && l.ep_size > 1 && l.dispatcher == planner::Dispatcher::kA2av) {
      a2av = static_cast<int>(i);
      break;
    }
  }
  ASSERT_GE(a2av, 0) << "the decode plan lists an EP layout with the a2av dispatcher";
  d->layoutCombo()->setCurrentIndex(a2av);
  chooseByKeys(d->formatCombo(), QStringLiteral("vllm"));
  EXPECT_TRUE(
      d->preview()->toPlainText().contains(QStringLiteral("--all2all-backend deepep_low_latency")))
      << d->preview()->toPlainText().toStdString();
  d->close();
}

TEST(GuiExportDialog, ContiguousPrefillExportsWithoutPlacementFile) {
  app();
  MainWindow w;
  w.waitForIdle();
  ExportDialog* d = w.makeExportDialog();
  EXPECT_EQ(d->layoutCombo()->currentIndex(), w.session()->plan()->recommended);
  EXPECT_TRUE(d->inputsLabel()->text().contains(QStringLiteral("contiguous (no placement file)")));
  EXPECT_TRUE(d->inputsLabel()->text().contains(QStringLiteral("4096 tokens per GPU")));
  chooseByKeys(d->formatCombo(), QStringLiteral("sglang"));
  const QString text = d->preview()->toPlainText();
  EXPECT_FALSE(text.contains(QStringLiteral("sglang_expert_location.json"))) << text.toStdString();
  Request r;
  r.model = models::kDefaultModel;
  r.load = "uniform";
  r.phase = "prefill";
  r.tokens = 4096;
  auto model = models::load_model(r.model);
  auto setup = planner::make_cost_setup(r.cluster, "");
  auto plan = planner::make_plan(*model, *setup->cluster, setup->costs(), planner::PlanRequest{});
  ASSERT_TRUE(plan.ok());
  auto spec = planner::export_spec_from_plan(planner::summarize_plan(*plan), "", "");
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(text.toStdString(), planner::export_to_text(*planner::export_layout(
                                    *spec, planner::ExportFormat::kSglang)));
  d->close();
}

TEST(GuiExportDialog, InexpressibleLayoutShowsTheErrorInPlace) {
  app();
  MainWindow w;
  w.waitForIdle();
  ExportDialog* d = w.makeExportDialog();
  chooseByKeys(d->formatCombo(), QStringLiteral("vllm"));
  int ep8tp2 = -1;
  for (int i = 0; i < d->layoutCombo()->count(); ++i) {
    if (d->layoutCombo()->itemText(i).contains(QStringLiteral("ep8×tp2"))) {
      ep8tp2 = i;
      break;
    }
  }
  ASSERT_GE(ep8tp2, 0);
  d->layoutCombo()->setCurrentIndex(ep8tp2);
  EXPECT_FALSE(d->messageLabel()->isHidden());
  EXPECT_TRUE(d->messageLabel()->text().contains(QStringLiteral("never TP inside EP")));
  EXPECT_TRUE(d->preview()->toPlainText().isEmpty());
  EXPECT_FALSE(d->writeFiles());
  d->placementEdit()->setText(QStringLiteral("/nonexistent/place.json"));
  chooseByKeys(d->formatCombo(), QStringLiteral("json"));
  EXPECT_TRUE(d->messageLabel()->text().contains(QStringLiteral("/nonexistent/place.json")))
      << d->messageLabel()->text().toStdString();
  d->close();
}

TEST(GuiExportDialog, FrameworkVersionsFollowTheFormat) {
  app();
  MainWindow w;
  w.waitForIdle();
  ExportDialog* d = w.makeExportDialog();
  chooseByKeys(d->formatCombo(), QStringLiteral("sglang"));
  // sglang: its current release selected, the older spellings listed.
  ASSERT_EQ(d->versionCombo()->count(), 3);
  EXPECT_EQ(d->versionCombo()->currentText(), QStringLiteral("0.5.23"));
  EXPECT_TRUE(d->preview()->toPlainText().contains(QStringLiteral("--attn-dp-size 16")));
  chooseByKeys(d->versionCombo(), QStringLiteral("0.5.21"));
  EXPECT_TRUE(d->preview()->toPlainText().contains(QStringLiteral("--enable-dp-attention")));
  // PaddleNLP 2.8.1 has no expert parallelism: the error names the dialog's own field.
  chooseByKeys(d->formatCombo(), QStringLiteral("paddle"));
  EXPECT_EQ(d->versionCombo()->currentText(), QStringLiteral("3.0.0b4"));
  chooseByKeys(d->versionCombo(), QStringLiteral("2.8.1"));
  EXPECT_TRUE(d->preview()->toPlainText().isEmpty());
  EXPECT_TRUE(d->messageLabel()->text().contains(QStringLiteral("Framework version 3.0.0b4 has")))
      << d->messageLabel()->text().toStdString();
  d->close();
}

TEST(GuiExportDialog, WritesThePreviewedFiles) {
  app();
  QTemporaryDir tmp;
  ASSERT_TRUE(tmp.isValid());
  MainWindow w;
  w.waitForIdle();
  ExportDialog* d = w.makeExportDialog();
  chooseByKeys(d->formatCombo(), QStringLiteral("json"));
  EXPECT_FALSE(d->writeButton()->isEnabled()) << "no folder chosen yet";
  d->folderEdit()->setFocus();
  QTest::keyClicks(d->folderEdit(), tmp.filePath(QStringLiteral("out")));
  ASSERT_TRUE(d->writeButton()->isEnabled());
  const QString preview = d->preview()->toPlainText();
  QTest::mouseClick(d->writeButton(), Qt::LeftButton);
  QFile f(tmp.filePath(QStringLiteral("out/moeplan_layout.json")));
  ASSERT_TRUE(f.open(QIODevice::ReadOnly));
  EXPECT_EQ(f.readAll().toStdString(), preview.toStdString());
  EXPECT_TRUE(d->messageLabel()->text().startsWith(QStringLiteral("Wrote 1 file")));
  // A folder that cannot be made: the error shows, nothing is written.
  QFile blocker(tmp.filePath(QStringLiteral("blocker")));
  ASSERT_TRUE(blocker.open(QIODevice::WriteOnly));
  blocker.close();
  d->folderEdit()->setText(tmp.filePath(QStringLiteral("blocker/sub")));
  EXPECT_FALSE(d->writeFiles());
  EXPECT_TRUE(d->messageLabel()->text().contains(QStringLiteral("cannot create the output folder")))
      << d->messageLabel()->text().toStdString();
  d->close();
}

TEST(GuiExportDialog, PlanErrorsShowInTheDialog) {
  app();
  ExportSource source;
  source.plan = Error{"No plan to export: model: file not found"};
  ExportDialog d(std::move(source));
  EXPECT_FALSE(d.messageLabel()->isHidden());
  EXPECT_TRUE(d.messageLabel()->text().contains(QStringLiteral("file not found")));
  EXPECT_FALSE(d.writeButton()->isEnabled());
  EXPECT_FALSE(d.formatCombo()->isEnabled());
}

}  // namespace
}  // namespace test_export_dialog
}  // namespace moeplan::gui
