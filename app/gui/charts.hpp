// Our own small chart views. Qt Charts is deprecated from Qt 6.10 (Qt Graphs replaces it), so
// every chart sits behind one of these classes; the heat map paints itself.
#pragma once

#include <QString>
#include <QStringList>
#include <QWidget>
#include <functional>
#include <vector>

class QAbstractItemModel;
class QChartView;
class QChart;

namespace moeplan::gui {

class PlanTableModel;

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

 private:
  void rebuild();
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
  void setData(const QString& title, const QStringList& series,
               const std::vector<std::vector<double>>& values, const QString& xTitle,
               const QString& yTitle, double yMin, double yMax);
  QChart* chart() const;

 private:
  QChartView* chartView_ = nullptr;
};

/// A matrix drawn as coloured cells (white → dark blue), with axis titles, a colour bar, and
/// optional block lines every `rowBlock` rows / `colBlock` columns (e.g. node boundaries).
class HeatMap : public QWidget {
  Q_OBJECT

 public:
  explicit HeatMap(QWidget* parent = nullptr);
  void setData(const QString& title, const std::vector<std::vector<double>>& values,
               const QString& rowTitle, const QString& colTitle, const QString& unit);
  void setBlocks(int rowBlock, int colBlock);
  /// Colours span [smallest positive value, max] instead of [0, max] (shows small differences;
  /// zero cells stay white).
  void setScaleFromMin(bool on) { fromMin_ = on; }
  /// Formats a cell value for the colour bar and tooltips (default: 3 significant digits).
  void setFormatter(std::function<QString(double)> f) { format_ = std::move(f); }
  const std::vector<std::vector<double>>& values() const { return values_; }
  QSize sizeHint() const override;

 protected:
  void paintEvent(QPaintEvent* event) override;
  bool event(QEvent* e) override;

 private:
  QRect plotRect() const;
  QString title_, rowTitle_, colTitle_, unit_;
  std::vector<std::vector<double>> values_;
  double max_ = 0.0;
  double min_ = 0.0;
  bool fromMin_ = false;
  int rowBlock_ = 0, colBlock_ = 0;
  std::function<QString(double)> format_;
};

}  // namespace moeplan::gui
