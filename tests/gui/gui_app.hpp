// The one QApplication of the GUI tests, under QT_QPA_PLATFORM=offscreen.
#pragma once

#include <QApplication>
#include <QStandardPaths>

namespace moeplan::gui {

inline QApplication& app() {
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  static int argc = 1;
  static char name[] = "gui_test";
  static char* argv[] = {name, nullptr};
  // NOTE: never destroyed: a QApplication destroyed by exit handlers, after the platform
  // plugin's own statics, crashes in ~QPointingDevice under the offscreen platform.
  static QApplication* instance = new QApplication(argc, argv);
  QStandardPaths::setTestModeEnabled(true);  // settings never touch the user's files
  return *instance;
}

}  // namespace moeplan::gui
