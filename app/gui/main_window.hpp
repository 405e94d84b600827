// The moeplan-gui main window: the model view (pick a bundled model or open a config.json and
// see its figures) and the backends dialog. Later views plug into the tab widget.
#pragma once

#include <QMainWindow>
#include <QString>

class QComboBox;
class QLabel;
class QTabWidget;
class QTableWidget;

namespace moeplan::gui {

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(QWidget* parent = nullptr);

  /// Loads a bundled model name or a config.json path; on failure the view shows the error.
  bool loadModel(const QString& nameOrPath);
  /// The model view's (label, value) table and the error line, for tests.
  QTableWidget* modelTable() const { return modelTable_; }
  QLabel* errorLabel() const { return errorLabel_; }
  QTabWidget* tabs() const { return tabs_; }
  /// Renders every view to DIR/<view>.png. Returns the number of files written, -1 on error.
  int saveScreenshots(const QString& dir);

 private slots:
  void onModelChosen(int index);
  void onOpenConfig();
  void onShowBackends();

 private:
  QWidget* buildModelView();

  QTabWidget* tabs_ = nullptr;
  QComboBox* modelCombo_ = nullptr;
  QTableWidget* modelTable_ = nullptr;
  QLabel* errorLabel_ = nullptr;
};

}  // namespace moeplan::gui
