# golden test header
if (Test-Path Env:_ENVKIT_0123abcd_ACTIVE) {
    if (Test-Path Env:_ENVKIT_0123abcd_OLD_PSModulePath) { $env:PSModulePath = $env:_ENVKIT_0123abcd_OLD_PSModulePath; Remove-Item Env:_ENVKIT_0123abcd_OLD_PSModulePath } else { Remove-Item Env:PSModulePath -ErrorAction SilentlyContinue }
    if (Test-Path Env:_ENVKIT_0123abcd_OLD_PATH) { $env:PATH = $env:_ENVKIT_0123abcd_OLD_PATH; Remove-Item Env:_ENVKIT_0123abcd_OLD_PATH } else { Remove-Item Env:PATH -ErrorAction SilentlyContinue }
    if (Test-Path Env:_ENVKIT_0123abcd_OLD_KMP_DUPLICATE_LIB_OK) { $env:KMP_DUPLICATE_LIB_OK = $env:_ENVKIT_0123abcd_OLD_KMP_DUPLICATE_LIB_OK; Remove-Item Env:_ENVKIT_0123abcd_OLD_KMP_DUPLICATE_LIB_OK } else { Remove-Item Env:KMP_DUPLICATE_LIB_OK -ErrorAction SilentlyContinue }
    if (Test-Path Env:_ENVKIT_0123abcd_OLD_ENVKIT_MULTILINE) { $env:ENVKIT_MULTILINE = $env:_ENVKIT_0123abcd_OLD_ENVKIT_MULTILINE; Remove-Item Env:_ENVKIT_0123abcd_OLD_ENVKIT_MULTILINE } else { Remove-Item Env:ENVKIT_MULTILINE -ErrorAction SilentlyContinue }
    if (Test-Path Env:_ENVKIT_0123abcd_OLD_ENVKIT_SPECIAL) { $env:ENVKIT_SPECIAL = $env:_ENVKIT_0123abcd_OLD_ENVKIT_SPECIAL; Remove-Item Env:_ENVKIT_0123abcd_OLD_ENVKIT_SPECIAL } else { Remove-Item Env:ENVKIT_SPECIAL -ErrorAction SilentlyContinue }
    if (Test-Path Env:_ENVKIT_0123abcd_OLD_ENVKIT_QUOTES) { $env:ENVKIT_QUOTES = $env:_ENVKIT_0123abcd_OLD_ENVKIT_QUOTES; Remove-Item Env:_ENVKIT_0123abcd_OLD_ENVKIT_QUOTES } else { Remove-Item Env:ENVKIT_QUOTES -ErrorAction SilentlyContinue }
    if (Test-Path Env:_ENVKIT_0123abcd_OLD_MKL_THREADING_LAYER) { $env:MKL_THREADING_LAYER = $env:_ENVKIT_0123abcd_OLD_MKL_THREADING_LAYER; Remove-Item Env:_ENVKIT_0123abcd_OLD_MKL_THREADING_LAYER } else { Remove-Item Env:MKL_THREADING_LAYER -ErrorAction SilentlyContinue }
    Remove-Item Env:_ENVKIT_0123abcd_ACTIVE
}
