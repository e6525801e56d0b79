//! Statistics: summaries, bootstrap CIs, outliers, comparisons, histograms.
