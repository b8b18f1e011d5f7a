# golden test header
if (-not (Test-Path Env:_ENVKIT_0123abcd_ACTIVE)) {
    if (Test-Path Env:MKL_THREADING_LAYER) { $env:_ENVKIT_0123abcd_OLD_MKL_THREADING_LAYER = $env:MKL_THREADING_LAYER } else { Remove-Item Env:_ENVKIT_0123abcd_OLD_MKL_THREADING_LAYER -ErrorAction SilentlyContinue }
    if (Test-Path Env:ENVKIT_QUOTES) { $env:_ENVKIT_0123abcd_OLD_ENVKIT_QUOTES = $env:ENVKIT_QUOTES } else { Remove-Item Env:_ENVKIT_0123abcd_OLD_ENVKIT_QUOTES -ErrorAction SilentlyContinue }
    if (Test-Path Env:ENVKIT_SPECIAL) { $env:_ENVKIT_0123abcd_OLD_ENVKIT_SPECIAL = $env:ENVKIT_SPECIAL } else { Remove-Item Env:_ENVKIT_0123abcd_OLD_ENVKIT_SPECIAL -ErrorAction SilentlyContinue }
    if (Test-Path Env:ENVKIT_MULTILINE) { $env:_ENVKIT_0123abcd_OLD_ENVKIT_MULTILINE = $env:ENVKIT_MULTILINE } else { Remove-Item Env:_ENVKIT_0123abcd_OLD_ENVKIT_MULTILINE -ErrorAction SilentlyContinue }
    if (Test-Path Env:KMP_DUPLICATE_LIB_OK) { $env:_ENVKIT_0123abcd_OLD_KMP_DUPLICATE_LIB_OK = $env:KMP_DUPLICATE_LIB_OK } else { Remove-Item Env:_ENVKIT_0123abcd_OLD_KMP_DUPLICATE_LIB_OK -ErrorAction SilentlyContinue }
    if (Test-Path Env:PATH) { $env:_ENVKIT_0123abcd_OLD_PATH = $env:PATH } else { Remove-Item Env:_ENVKIT_0123abcd_OLD_PATH -ErrorAction SilentlyContinue }
    if (Test-Path Env:PSModulePath) { $env:_ENVKIT_0123abcd_OLD_PSModulePath = $env:PSModulePath } else { Remove-Item Env:_ENVKIT_0123abcd_OLD_PSModulePath -ErrorAction SilentlyContinue }
    $env:_ENVKIT_0123abcd_ACTIVE = '1'
}
$env:MKL_THREADING_LAYER = 'GNU'
$env:ENVKIT_QUOTES = 'it''s "100%" & more ^ | < > !x! $env:HOME `n'
$env:ENVKIT_SPECIAL = 'it''s 100% & more ^ | < > (x) !x! $env:HOME `n'
$env:ENVKIT_MULTILINE = 'line one
line two'
Remove-Item Env:KMP_DUPLICATE_LIB_OK -ErrorAction SilentlyContinue
$envkitNew = @('C:\tools\bin', 'D:\x y')
$envkitOld = @(if (Test-Path Env:PATH) { $env:PATH.Split(';') | Where-Object { $_ -and ($envkitNew -notcontains $_) } })
$env:PATH = (@($envkitNew) + @($envkitOld)) -join ';'
Remove-Variable envkitNew, envkitOld
$envkitNew = @('C:\mods')
$envkitOld = @(if (Test-Path Env:PSModulePath) { $env:PSModulePath.Split(';') | Where-Object { $_ -and ($envkitNew -notcontains $_) } })
$env:PSModulePath = (@($envkitOld) + @($envkitNew)) -join ';'
Remove-Variable envkitNew, envkitOld
