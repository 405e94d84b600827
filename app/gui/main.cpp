// moeplan-gui: the Qt6 desktop app. `--screenshot DIR` renders each view to PNG and exits.
#include <QApplication>
#include <QCommandLineParser>
#include <QLabel>
#include <cstdio>

#include "app/gui/main_window.hpp"

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setApplicationName(QStringLiteral("moeplan-gui"));
  QApplication::setApplicationVersion(QStringLiteral(MOEPLAN_VERSION));
  QCommandLineParser parser;
  parser.setApplicationDescription(QStringLiteral("Plan MoE parallel layouts on GPU clusters"));
  parser.addHelpOption();
  parser.addVersionOption();
  const QCommandLineOption screenshot(
      QStringLiteral("screenshot"), QStringLiteral("Render every view to DIR/<view>.png and exit."),
      QStringLiteral("DIR"));
  const QCommandLineOption model(QStringLiteral("model"),
                                 QStringLiteral("Bundled model name or config.json path."),
                                 QStringLiteral("NAME|PATH"));
  parser.addOption(screenshot);
  parser.addOption(model);
  parser.process(app);

  moeplan::gui::MainWindow window;
  if (parser.isSet(model) && !window.loadModel(parser.value(model)) && parser.isSet(screenshot)) {
    std::fprintf(stderr, "moeplan-gui: error: %s\n",
                 window.errorLabel()->text().toLocal8Bit().constData());
    return 2;
  }
  if (parser.isSet(screenshot)) {
    window.show();
    const int n = window.saveScreenshots(parser.value(screenshot));
    if (n < 0) {
      std::fprintf(stderr, "moeplan-gui: error: cannot write screenshots to %s\n",
                   parser.value(screenshot).toLocal8Bit().constData());
      return 2;
    }
    std::printf("wrote %d screenshot(s) to %s\n", n,
                parser.value(screenshot).toLocal8Bit().constData());
    return 0;
  }
  window.show();
  return QApplication::exec();
}
