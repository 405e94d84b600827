// The export dialog under QT_QPA_PLATFORM=offscreen: its preview is planner/export's text, it
// writes the same files as `moeplan export`, and errors show in the dialog.
#include <gtest/gtest.h>

#include <QApplication>
#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QTemporaryDir>

#include "app/gui/export_dialog.hpp"

namespace moeplan::gui {
namespace {

QApplication& app() {
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  static int argc = 1;
  static char name[] = "gui_test";
  static char* argv[] = {name, nullptr};
  static QApplication instance(argc, argv);
  return instance;
}

/// The planner's own export of `plan`'s layout `selector` in `format`.
std::string planner_text(const planner::PlanSummary& plan, const std::string& selector,
                         planner::ExportFormat format) {
  auto spec = planner::export_spec_from_plan(plan, selector, "");
  EXPECT_TRUE(spec.ok()) << spec.error().message;
  auto out = planner::export_layout(*spec, format);
  EXPECT_TRUE(out.ok()) << out.error().message;
  return planner::export_to_text(*out);
}

TEST(GuiExportDialog, PreviewIsThePlannerExport) {
  app();
  auto plan = ExportDialog::defaultPlan(QStringLiteral("qwen2-57b-a14b"));
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  ExportDialog d(*plan);
  // The recommended layout is selected; the first format is sglang.
  EXPECT_EQ(d.layoutCombo()->currentIndex(), plan->recommended);
  EXPECT_EQ(d.formatCombo()->currentText(), QStringLiteral("sglang"));
  EXPECT_EQ(d.preview()->toPlainText().toStdString(),
            planner_text(*plan, "", planner::ExportFormat::kSglang));
  EXPECT_FALSE(d.writeButton()->isEnabled()) << "no folder chosen yet";
  d.formatCombo()->setCurrentText(QStringLiteral("megatron"));
  EXPECT_EQ(d.preview()->toPlainText().toStdString(),
            planner_text(*plan, "", planner::ExportFormat::kMegatron));
}

TEST(GuiExportDialog, InexpressibleLayoutShowsTheErrorInPlace) {
  app();
  auto plan = ExportDialog::defaultPlan(QStringLiteral("qwen2-57b-a14b"));
  ASSERT_TRUE(plan.ok());
  ExportDialog d(*plan);
  d.formatCombo()->setCurrentText(QStringLiteral("vllm"));
  int ep8tp2 = -1;
  for (int i = 0; i < d.layoutCombo()->count(); ++i) {
    if (d.layoutCombo()->itemText(i).contains(QStringLiteral("ep8×tp2"))) {
      ep8tp2 = i;
      break;
    }
  }
  ASSERT_GE(ep8tp2, 0);
  d.layoutCombo()->setCurrentIndex(ep8tp2);
  EXPECT_FALSE(d.messageLabel()->isHidden());
  EXPECT_TRUE(d.messageLabel()->text().contains(QStringLiteral("never TP inside EP")));
  EXPECT_TRUE(d.preview()->toPlainText().isEmpty());
  EXPECT_FALSE(d.writeFiles());
  d.placementEdit()->setText(QStringLiteral("/nonexistent/place.json"));
  d.formatCombo()->setCurrentText(QStringLiteral("json"));
  EXPECT_TRUE(d.messageLabel()->text().contains(QStringLiteral("/nonexistent/place.json")))
      << d.messageLabel()->text().toStdString();
}

TEST(GuiExportDialog, FrameworkVersionsFollowTheFormat) {
  app();
  auto plan = ExportDialog::defaultPlan(QStringLiteral("qwen2-57b-a14b"));
  ASSERT_TRUE(plan.ok());
  ExportDialog d(*plan);
  // sglang first: its current release selected, the older spellings listed.
  ASSERT_EQ(d.versionCombo()->count(), 3);
  EXPECT_EQ(d.versionCombo()->currentText(), QStringLiteral("0.5.23"));
  EXPECT_TRUE(d.preview()->toPlainText().contains(QStringLiteral("--attn-dp-size 16")));
  d.versionCombo()->setCurrentText(QStringLiteral("0.5.21"));
  EXPECT_TRUE(d.preview()->toPlainText().contains(QStringLiteral("--enable-dp-attention")));
  EXPECT_EQ(d.preview()->toPlainText().toStdString(),
            planner::export_to_text(
                *planner::export_layout(*planner::export_spec_from_plan(*plan, "", ""),
                                        planner::ExportFormat::kSglang, {"0.5.21", ""})));
  // PaddleNLP 2.8.1 has no expert parallelism: the error names the dialog's own field.
  d.formatCombo()->setCurrentText(QStringLiteral("paddle"));
  EXPECT_EQ(d.versionCombo()->currentText(), QStringLiteral("3.0.0b4"));
  d.versionCombo()->setCurrentText(QStringLiteral("2.8.1"));
  EXPECT_TRUE(d.preview()->toPlainText().isEmpty());
  EXPECT_TRUE(d.messageLabel()->text().contains(QStringLiteral("Framework version 3.0.0b4 has")))
      << d.messageLabel()->text().toStdString();
}

TEST(GuiExportDialog, WritesTheSameFilesAsTheCli) {
  app();
  auto plan = ExportDialog::defaultPlan(QStringLiteral("qwen2-57b-a14b"));
  ASSERT_TRUE(plan.ok());
  QTemporaryDir tmp;
  ASSERT_TRUE(tmp.isValid());
  ExportDialog d(*plan);
  d.formatCombo()->setCurrentText(QStringLiteral("json"));
  EXPECT_FALSE(d.writeButton()->isEnabled());
  // setText and click() rather than QTest's synthetic key and mouse events: QTest's input
  // devices outlive the function-static QApplication and crash at exit.
  d.folderEdit()->setText(tmp.filePath(QStringLiteral("out")));
  ASSERT_TRUE(d.writeButton()->isEnabled());
  d.writeButton()->click();
  QFile f(tmp.filePath(QStringLiteral("out/moeplan_layout.json")));
  ASSERT_TRUE(f.open(QIODevice::ReadOnly));
  EXPECT_EQ(f.readAll().toStdString(), planner_text(*plan, "", planner::ExportFormat::kJson));
  EXPECT_TRUE(d.messageLabel()->text().startsWith(QStringLiteral("Wrote 1 file")));
  // A folder that cannot be made: the error shows, nothing is written.
  QFile blocker(tmp.filePath(QStringLiteral("blocker")));
  ASSERT_TRUE(blocker.open(QIODevice::WriteOnly));
  blocker.close();
  d.folderEdit()->setText(tmp.filePath(QStringLiteral("blocker/sub")));
  EXPECT_FALSE(d.writeFiles());
  EXPECT_TRUE(d.messageLabel()->text().contains(QStringLiteral("cannot create the output folder")))
      << d.messageLabel()->text().toStdString();
}

TEST(GuiExportDialog, PlanErrorsShowInTheDialog) {
  app();
  ExportDialog d(ExportDialog::defaultPlan(QStringLiteral("/nonexistent/config.json")));
  EXPECT_FALSE(d.messageLabel()->isHidden());
  EXPECT_TRUE(d.messageLabel()->text().contains(QStringLiteral("/nonexistent/config.json")));
  EXPECT_FALSE(d.writeButton()->isEnabled());
  EXPECT_FALSE(d.formatCombo()->isEnabled());
}

}  // namespace
}  // namespace moeplan::gui
