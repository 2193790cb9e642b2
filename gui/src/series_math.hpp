// Turning a metric's full history into what a chart draws: smoothing and decimation.
#pragma once

#include <QList>
#include <QPointF>

namespace tandem::gui {

/// TensorBoard's debiased exponential moving average: last = last·w + (1−w)·y, shown as
/// last / (1 − w^n). `weight` in [0, 1); 0 returns the points unchanged. Non-finite values are
/// passed through without entering the average.
QList<QPointF> smooth(const QList<QPointF>& points, double weight);

/// At most `max_points` points that keep the shape: the points are cut into buckets of equal
/// count and each bucket keeps its lowest and highest point, in x order; the first and last points
/// always stay. Returns `points` itself when it is small enough. `max_points` ≥ 4.
QList<QPointF> decimate(const QList<QPointF>& points, int max_points);

}  // namespace tandem::gui
