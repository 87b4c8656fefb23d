"""The boosters' objectives this server explains, by library and task (their names as each
library writes them in its model files): the rest (ranking, survival, custom) are refused by name
(:mod:`dashboard.loading.boosters`)."""

XGB_REGRESSION = {
    "reg:squarederror", "reg:linear", "reg:squaredlogerror", "reg:logistic", "reg:pseudohubererror",
    "reg:absoluteerror", "reg:quantileerror", "reg:gamma", "reg:tweedie", "count:poisson",
}  # fmt: skip
XGB_CLASSIFICATION = {"binary:logistic", "binary:logitraw", "binary:hinge", "multi:softprob", "multi:softmax"}
LGB_REGRESSION = {
    "regression", "regression_l2", "l2", "mean_squared_error", "mse", "regression_l1", "l1", "mae",
    "huber", "fair", "poisson", "quantile", "mape", "gamma", "tweedie", "cross_entropy", "xentropy",
    "cross_entropy_lambda", "xentlambda",
}  # fmt: skip
LGB_CLASSIFICATION = {"binary", "multiclass", "softmax", "multiclassova", "multiclass_ova", "ova", "ovr"}
CB_REGRESSION = {
    "RMSE", "MAE", "Quantile", "Expectile", "LogLinQuantile", "Poisson", "Tweedie", "MAPE", "Huber",
    "Lq", "LogCosh", "FairLoss", "NumErrors", "SMAPE", "R2", "MSLE", "MedianAbsoluteError",
}  # fmt: skip
CB_CLASSIFICATION = {"Logloss", "CrossEntropy", "MultiClass", "MultiClassOneVsAll"}
CB_EXPONENT = {"Poisson", "Tweedie"}  # CatBoostRegressor.predict's default there is exp(raw)
