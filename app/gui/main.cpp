// moeplan-gui: the Qt6 desktop app. `--screenshot DIR` renders each view to PNG and exits;
// `--walk DIR` (in a real X server, driven by scripts/gui-walk.sh) captures the screen each time
// the user switches to a view, until every view has been captured.
#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QCommandLineParser>
#include <QDir>
#include <QGuiApplication>
#include <QLabel>
#include <QPixmap>
#include <QScreen>
#include <QSpinBox>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTimer>
#include <cstdio>
#include <memory>
#include <set>

#include "app/gui/load_view.hpp"
#include "app/gui/main_window.hpp"
#include "app/gui/profiling_view.hpp"
#include "app/gui/serving_view.hpp"
#include "app/gui/topology_view.hpp"
#include "kernels/host_memory.hpp"
#include "planner/plan_request.hpp"

namespace {

int fail(const QString& what) {
  std::fprintf(stderr, "moeplan-gui: error: %s\n", what.toLocal8Bit().constData());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  moeplan::kernels::configure_host_allocator();
  QApplication app(argc, argv);
  QApplication::setOrganizationName(QStringLiteral("moeplan"));
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
  const QCommandLineOption cluster(QStringLiteral("cluster"),
                                   QStringLiteral("Bundled cluster name or cluster JSON path."),
                                   QStringLiteral("NAME|PATH"));
  const QCommandLineOption load(
      QStringLiteral("load"),
      QStringLiteral("Expert-load file (.json, .csv, .npy) or synthetic spec (e.g. "
                     "powerlaw:alpha=1.2,shuffle=1)."),
      QStringLiteral("PATH|SPEC"));
  const QCommandLineOption placement(
      QStringLiteral("placement"),
      QStringLiteral("Placement policy the plan costs with: contiguous, round_robin, eplb, best."),
      QStringLiteral("POLICY"), QStringLiteral("contiguous"));
  const QCommandLineOption redundant(
      QStringLiteral("redundant"),
      QStringLiteral("Redundant expert slots for eplb and best: N per EP rank, total:R (R in "
                     "all) or auto, as moeplan plan --redundant."),
      QStringLiteral("N|total:R|auto"), QStringLiteral("0"));
  const QCommandLineOption costs(
      QStringLiteral("costs"),
      QStringLiteral(
          "Cost database (profile DB) to plan with, as moeplan plan --costs. With "
          "--screenshot the profiling view shows its points; without it, "
          "--screenshot profiles this machine (2 ranks, 1/8 widths, rows up to 256: about a "
          "minute) and validates against that profile at 256 tokens."),
      QStringLiteral("FILE"));
  const QCommandLineOption walk(
      QStringLiteral("walk"),
      QStringLiteral("In a real X server: show the window maximized, print 'walk: ready', and "
                     "each time a view is shown (e.g. by Alt+N from xdotool) save the whole "
                     "screen to DIR/<view>.png and print 'walk: captured <view>'; exit when "
                     "every view has been captured (scripts/gui-walk.sh)."),
      QStringLiteral("DIR"));
  const QCommandLineOption phase(QStringLiteral("phase"),
                                 QStringLiteral("prefill or decode (decode also draws the Pareto "
                                                "sweep of the batch per GPU)."),
                                 QStringLiteral("PHASE"), QStringLiteral("prefill"));
  const QCommandLineOption context(
      QStringLiteral("context"),
      QStringLiteral("Input and output tokens per request, as moeplan plan --isl and --osl (the "
                     "KV cache is counted; with --screenshot or --walk the Serving view plans "
                     "serving for them)."),
      QStringLiteral("ISL,OSL"));
  parser.addOption(context);
  const QCommandLineOption objective(
      QStringLiteral("objective"),
      QStringLiteral("The Load balance view's placement objective: tokens (contiguous, eplb, "
                     "best) or time (best-time added: best refined on the cost model's predicted "
                     "MoE time of the selected layout, as moeplan place --objective time)."),
      QStringLiteral("tokens|time"), QStringLiteral("tokens"));
  parser.addOption(objective);
  const QCommandLineOption targets(
      QStringLiteral("targets"),
      QStringLiteral("The Serving view's TTFT and TPOT targets in ms, as moeplan plan --ttft-ms "
                     "and --tpot-ms (0: none)."),
      QStringLiteral("TTFT,TPOT"));
  parser.addOption(targets);
  parser.addOption(phase);
  parser.addOption(walk);
  parser.addOption(costs);
  parser.addOption(placement);
  parser.addOption(redundant);
  parser.addOption(screenshot);
  parser.addOption(model);
  parser.addOption(cluster);
  parser.addOption(load);
  parser.process(app);

  const bool walking = parser.isSet(walk);
  const bool shots = parser.isSet(screenshot) || walking;
  if (walking && QGuiApplication::platformName() != QStringLiteral("xcb")) {
    return fail(QStringLiteral("--walk: expected a real X server (platform xcb, e.g. Xvfb with "
                               "DISPLAY set), got platform '%1'")
                    .arg(QGuiApplication::platformName()));
  }
  moeplan::gui::MainWindow window(nullptr, !shots);
  if (parser.isSet(model) && !window.loadModel(parser.value(model)) && shots) {
    return fail(window.errorLabel()->text());
  }
  if (parser.isSet(cluster) && !window.loadCluster(parser.value(cluster)) && shots) {
    return fail(window.topologyView()->errorLabel()->text());
  }
  if (parser.isSet(load) && !window.loadLoad(parser.value(load)) && shots) {
    return fail(window.loadErrorLabel()->text());
  }
  if (parser.isSet(phase)) {
    const int index = window.phaseCombo()->findText(parser.value(phase));
    if (index < 0) {
      return fail(
          QStringLiteral("--phase: expected prefill or decode, got '%1'").arg(parser.value(phase)));
    }
    window.phaseCombo()->setCurrentIndex(index);
  }
  if (parser.isSet(context)) {
    const QStringList parts = parser.value(context).split(QLatin1Char(','));
    bool ok_in = false, ok_out = false;
    const int in = parts.size() == 2 ? parts[0].toInt(&ok_in) : 0;
    const int out = parts.size() == 2 ? parts[1].toInt(&ok_out) : 0;
    if (!ok_in || !ok_out || in < 1 || out < 1 || in > window.islSpin()->maximum() ||
        out > window.oslSpin()->maximum()) {
      return fail(QStringLiteral("--context: expected ISL,OSL, two positive token counts, got '%1'")
                      .arg(parser.value(context)));
    }
    window.islSpin()->setValue(in);
    window.oslSpin()->setValue(out);
  }
  if (parser.isSet(targets)) {
    const QStringList parts = parser.value(targets).split(QLatin1Char(','));
    auto* view = window.servingView();
    // Each part a time in ms the view's spin box can hold (0: none).
    const auto inRange = [](const QString& text, const QDoubleSpinBox* spin, double* ms) {
      bool ok = false;
      *ms = text.toDouble(&ok);
      return ok && *ms >= 0.0 && *ms <= spin->maximum();
    };
    double ttft = 0.0, tpot = 0.0;
    if (parts.size() != 2 || !inRange(parts[0], view->ttftSpin(), &ttft) ||
        !inRange(parts[1], view->tpotSpin(), &tpot)) {
      return fail(QStringLiteral("--targets: expected TTFT,TPOT, two times in ms (0: none), got "
                                 "'%1'")
                      .arg(parser.value(targets)));
    }
    view->ttftSpin()->setValue(ttft);
    view->tpotSpin()->setValue(tpot);
  }
  if (parser.isSet(objective)) {
    const QString value = parser.value(objective);
    if (value != QStringLiteral("tokens") && value != QStringLiteral("time")) {
      return fail(QStringLiteral("--objective: expected tokens or time, got '%1'").arg(value));
    }
    window.loadView()->timeObjectiveCheck()->setChecked(value == QStringLiteral("time"));
  }
  if (parser.isSet(placement) || parser.isSet(redundant)) {
    if (!window.setPlacement(parser.value(placement), parser.value(redundant))) {
      return fail(QStringLiteral("--placement: expected contiguous, round_robin, eplb or best; "
                                 "--redundant: expected N (0-%1 per EP rank), total:R or auto")
                      .arg(moeplan::planner::kMaxRedundantPerRank));
    }
  }
  if (parser.isSet(costs)) {
    if (!window.loadCosts(parser.value(costs)) && shots) {
      return fail(window.costErrorLabel()->text());
    }
    if (shots && !window.profilingView()->openDatabase(parser.value(costs))) {
      return fail(window.profilingView()->errorLabel()->text());
    }
  }
  if (shots) {
    QTemporaryDir tmp;
    if (walking) {
      window.showMaximized();
    } else {
      window.resize(1366, 768);
      window.show();
    }
    if (!parser.isSet(costs)) {
      // A real, small profile and validate, so the profiling view shows measured points.
      const QString err = window.profilingView()->runExample(
          QDir(tmp.path()).filePath(QStringLiteral("profile.db")), 2, 8, QStringLiteral("256"));
      if (!err.isEmpty()) return fail(QStringLiteral("profiling view: ") + err);
    }
    if (parser.isSet(context)) {
      // The Serving view's picture: the serving plan of the same inputs and --targets.
      window.waitForIdle();
      window.servingView()->start();
      window.waitForIdle();
      if (!window.servingView()->errorLabel()->text().isEmpty()) {
        return fail(QStringLiteral("serving view: ") + window.servingView()->errorLabel()->text());
      }
    }
    if (walking) {
      const QString dir = parser.value(walk);
      if (!QDir().mkpath(dir)) return fail(QStringLiteral("--walk: cannot create ") + dir);
      window.waitForIdle();
      auto captured = std::make_shared<std::set<QString>>();
      int status = 0;
      // Each view the user switches to: once planning and placement are done and the view has
      // painted, the whole screen as the X server shows it (window manager frame included).
      auto capture = [&window, dir, captured, &status] {
        window.waitForIdle();
        QCoreApplication::processEvents();
        QWidget* page = window.tabs()->currentWidget();
        const QString name = page->objectName();
        const QPixmap shot = window.screen()->grabWindow(0);
        if (shot.isNull() || !shot.save(QDir(dir).filePath(name + QStringLiteral(".png")))) {
          status = fail(QStringLiteral("--walk: cannot capture the screen into ") + dir);
          QApplication::exit(status);
          return;
        }
        captured->insert(name);
        std::printf("walk: captured %s (%dx%d)\n", name.toLocal8Bit().constData(), shot.width(),
                    shot.height());
        std::fflush(stdout);
        if (static_cast<int>(captured->size()) == window.tabs()->count()) QApplication::exit(0);
      };
      QObject::connect(window.tabs(), &QTabWidget::currentChanged, &window,
                       [capture] { QTimer::singleShot(400, capture); });
      QTimer::singleShot(800, [capture] {
        std::printf("walk: ready\n");
        std::fflush(stdout);
        capture();
      });
      const int rc = QApplication::exec();
      return status != 0 ? status : rc;
    }
    const int n = window.saveScreenshots(parser.value(screenshot));
    if (n < 0)
      return fail(QStringLiteral("cannot write screenshots to ") + parser.value(screenshot));
    std::printf("wrote %d screenshot(s) to %s\n", n,
                parser.value(screenshot).toLocal8Bit().constData());
    return 0;
  }
  window.show();
  return QApplication::exec();
}
