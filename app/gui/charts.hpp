// Our own small chart views. Qt Charts is deprecated from Qt 6.10 (Qt Graphs replaces it), so
// every chart sits behind one of these classes; the heat map paints itself.
#pragma once

#include <QColor>
#include <QString>
#include <QStringList>
#include <QWidget>
#include <functional>
#include <vector>

#include "planner/plan.hpp"

class QAbstractItemModel;
class QChartView;
class QChart;

namespace moeplan::gui {

class PlanTableModel;

/// A plan's cost source as the time chart's axis names it: the kind without its provenance
/// ("roofline-calibrated" for "roofline-calibrated (aiconfigurator-core 0.12.0, trtllm …)"), a
/// measured database by its file name ("measured:h200.db (p10)" for "measured:/a/b/h200.db
/// (p10)"); other names unchanged.
QString shortCostSource(const QString& source);

/// Horizontal stacked bars of each layout's per-layer time (router .. shared) for the first
/// rows of a (filtered, sorted) view of a PlanTableModel.
class BreakdownChart : public QWidget {
  Q_OBJECT

 public:
  explicit BreakdownChart(QWidget* parent = nullptr);
  /// `view` is the proxy the table shows; `source` the plan model behind it.
  void setModel(QAbstractItemModel* view, const PlanTableModel* source);
  static constexpr int kMaxRows = 10;
  QChart* chart() const;
  /// Bars shown: the first rows of the table, as many as have room for their label.
  int shownRows() const { return shownRows_; }
  /// The font of the bar labels.
  QFont labelFont() const;

 protected:
  void resizeEvent(QResizeEvent* event) override;

 private:
  void rebuild();
  int rowsThatFit() const;
  int shownRows_ = kMaxRows;
  QAbstractItemModel* view_ = nullptr;
  const PlanTableModel* source_ = nullptr;
  QChartView* chartView_ = nullptr;
};

/// Stacked bars of memory per GPU (experts, shared, dense, buffers, activations) for the same
/// rows, with the device's HBM capacity as a line.
class MemoryChart : public QWidget {
  Q_OBJECT

 public:
  explicit MemoryChart(QWidget* parent = nullptr);
  void setModel(QAbstractItemModel* view, const PlanTableModel* source);
  QChart* chart() const;

 private:
  void rebuild();
  QAbstractItemModel* view_ = nullptr;
  const PlanTableModel* source_ = nullptr;
  QChartView* chartView_ = nullptr;
};

/// Grouped vertical bars: one set per series, one group per category.
class GroupedBarChart : public QWidget {
  Q_OBJECT

 public:
  explicit GroupedBarChart(QWidget* parent = nullptr);
  void setData(const QString& title, const QStringList& categories, const QStringList& series,
               const std::vector<std::vector<double>>& values, const QString& xTitle,
               const QString& yTitle);
  QChart* chart() const;

 private:
  QChartView* chartView_ = nullptr;
};

/// Lines over an integer x axis (e.g. balancedness per layer), one per series.
class LineChart : public QWidget {
  Q_OBJECT

 public:
  explicit LineChart(QWidget* parent = nullptr);
  /// Point i of a series sits at x = xFirst + i.
  void setData(const QString& title, const QStringList& series,
               const std::vector<std::vector<double>>& values, const QString& xTitle,
               const QString& yTitle, double yMin, double yMax, double xFirst = 0.0);
  QChart* chart() const;

 private:
  QChartView* chartView_ = nullptr;
};

/// The decode Pareto sweep (planner::decode_pareto): every batch's recommended layout as a point
/// of tokens/s/user (x) against tokens/s/GPU (y), labelled with its batch per GPU, and the front
/// (points no other beats on both) joined by a line.
class ParetoChart : public QWidget {
  Q_OBJECT

 public:
  explicit ParetoChart(QWidget* parent = nullptr);
  void setPoints(const std::vector<planner::ParetoPoint>& points);
  QChart* chart() const;
  const std::vector<planner::ParetoPoint>& points() const { return points_; }

 private:
  QChartView* chartView_ = nullptr;
  std::vector<planner::ParetoPoint> points_;
};

/// A matrix drawn as coloured cells with axis titles, a colour bar, and optional block lines
/// every `rowBlock` rows / `colBlock` columns (e.g. node boundaries). Non-zero values run from
/// light to dark blue (the smallest is never white); zero has its own colour (light grey,
/// shown under the colour bar); a matrix whose non-zero values are all equal is drawn in one
/// mid blue and the bar says so. Hovering a cell shows its value.
class HeatMap : public QWidget {
  Q_OBJECT

 public:
  explicit HeatMap(QWidget* parent = nullptr);
  void setData(const QString& title, const std::vector<std::vector<double>>& values,
               const QString& rowTitle, const QString& colTitle, const QString& unit);
  void setBlocks(int rowBlock, int colBlock);
  /// Colours span [smallest non-zero value, max] instead of [0, max] (shows small differences).
  void setScaleFromMin(bool on) { fromMin_ = on; }
  /// A fixed colour range (e.g. shared by several maps) instead of the matrix's own; lo > hi
  /// returns to the matrix's own range.
  void setRange(double lo, double hi);
  /// Formats a cell value for the colour bar and tooltips (default: 3 significant digits).
  void setFormatter(std::function<QString(double)> f) { format_ = std::move(f); }
  const std::vector<std::vector<double>>& values() const { return values_; }
  /// The colour range in use: [lo, hi].
  double rangeLow() const { return min_; }
  double rangeHigh() const { return max_; }
  /// The colour of a value under the current range.
  QColor colourOf(double v) const;
  /// The colour of zero cells.
  static QColor zeroColour();
  /// The rectangle of cell (r, c) in widget coordinates.
  QRect cellRect(int r, int c) const;
  /// The tooltip text of cell (r, c).
  QString cellText(int r, int c) const;
  QSize sizeHint() const override;

 protected:
  void paintEvent(QPaintEvent* event) override;
  bool event(QEvent* e) override;

 private:
  void updateRange();
  QRect plotRect() const;
  QString title_, rowTitle_, colTitle_, unit_;
  std::vector<std::vector<double>> values_;
  double max_ = 0.0;
  double min_ = 0.0;
  bool fromMin_ = false;
  double fixedLo_ = 1.0, fixedHi_ = 0.0;  ///< lo > hi: none
  int rowBlock_ = 0, colBlock_ = 0;
  std::function<QString(double)> format_;
};

}  // namespace moeplan::gui
