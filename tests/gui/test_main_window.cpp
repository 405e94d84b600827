// The main window under QT_QPA_PLATFORM=offscreen: the model view loads bundled models and
// shows errors in place; screenshots render to PNG.
#include <gtest/gtest.h>

#include <QApplication>
#include <QComboBox>
#include <QDir>
#include <QFileInfo>
#include <QLabel>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>

#include "app/gui/main_window.hpp"
#include "tests/gui/gui_app.hpp"

namespace moeplan::gui {
namespace test_main_window {
namespace {

QString valueOf(QTableWidget* t, const QString& label) {
  for (int r = 0; r < t->rowCount(); ++r) {
    if (t->item(r, 0)->text() == label) return t->item(r, 1)->text();
  }
  return {};
}

TEST(GuiMainWindow, ShowsDefaultModel) {
  app();
  MainWindow w;
  EXPECT_TRUE(w.errorLabel()->isHidden());
  EXPECT_EQ(valueOf(w.modelTable(), QStringLiteral("Architecture")),
            QStringLiteral("Qwen2MoeForCausalLM (qwen2_moe)"));
  EXPECT_EQ(valueOf(w.modelTable(), QStringLiteral("Bytes per expert")),
            QStringLiteral("52.50 MiB (bf16)"));
}

TEST(GuiMainWindow, SwitchesModelAndShowsErrorsInPlace) {
  app();
  MainWindow w;
  ASSERT_TRUE(w.loadModel(QStringLiteral("deepseek-v3")));
  EXPECT_TRUE(
      valueOf(w.modelTable(), QStringLiteral("Router")).startsWith(QStringLiteral("sigmoid")));
  const int rows = w.modelTable()->rowCount();
  EXPECT_FALSE(w.loadModel(QStringLiteral("/nonexistent/config.json")));
  EXPECT_FALSE(w.errorLabel()->isHidden());
  EXPECT_TRUE(w.errorLabel()->text().contains(QStringLiteral("file not found")));
  // The figures stay those of the model the plan still uses, and the error says so.
  EXPECT_EQ(w.modelTable()->rowCount(), rows);
  EXPECT_TRUE(w.errorLabel()->text().contains(QStringLiteral("still those of deepseek-v3")));
}

TEST(GuiMainWindow, WeightsChoiceChangesTheModelsFormat) {
  app();
  MainWindow w;
  ASSERT_TRUE(w.loadModel(QStringLiteral("deepseek-v3")));
  EXPECT_EQ(valueOf(w.modelTable(), QStringLiteral("Weights")),
            QStringLiteral("fp8 e4m3, 128×128 blocks, fp32 scales [fp8-block, "
                           "quantization_config (fp8)]"));
  EXPECT_EQ(valueOf(w.modelTable(), QStringLiteral("Bytes per expert")),
            QStringLiteral("42.01 MiB (fp8-block, scales included)"));
  QComboBox* weights = w.weightsCombo();
  ASSERT_NE(weights, nullptr);
  EXPECT_EQ(weights->count(), 9);  // the model's own and the eight named formats
  weights->setCurrentIndex(weights->findData(QStringLiteral("bf16")));
  EXPECT_EQ(valueOf(w.modelTable(), QStringLiteral("Bytes per expert")),
            QStringLiteral("84.00 MiB (bf16)"));
  EXPECT_TRUE(valueOf(w.modelTable(), QStringLiteral("Weights")).endsWith("--weights bf16]"));
  // The choice stays when the model changes, as a what-if over models.
  ASSERT_TRUE(w.loadModel(QStringLiteral("qwen3-30b-a3b")));
  weights->setCurrentIndex(weights->findData(QStringLiteral("fp8-block")));
  EXPECT_TRUE(valueOf(w.modelTable(), QStringLiteral("Activations"))
                  .startsWith(QStringLiteral("fp8 e4m3 dynamic, 1×128 groups")));
  ASSERT_TRUE(w.loadModel(QStringLiteral("deepseek-v3")));
  EXPECT_TRUE(valueOf(w.modelTable(), QStringLiteral("Weights"))
                  .endsWith(QStringLiteral("--weights fp8-block]")));
  weights->setCurrentIndex(0);
  EXPECT_TRUE(valueOf(w.modelTable(), QStringLiteral("Weights"))
                  .endsWith(QStringLiteral("quantization_config (fp8)]")));
}

TEST(GuiMainWindow, ScreenshotsWritePngPerView) {
  app();
  MainWindow w;
  w.show();
  QTemporaryDir dir;
  ASSERT_TRUE(dir.isValid());
  const int n = w.saveScreenshots(dir.path());
  EXPECT_EQ(n, w.tabs()->count());
  const QFileInfo png(QDir(dir.path()).filePath(QStringLiteral("model.png")));
  EXPECT_TRUE(png.exists());
  EXPECT_GT(png.size(), 1000);
}

}  // namespace
}  // namespace test_main_window
}  // namespace moeplan::gui
