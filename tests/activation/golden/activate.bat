@REM golden test header
@IF DEFINED _ENVKIT_0123abcd_ACTIVE GOTO envkit_0123abcd_apply
@IF DEFINED MKL_THREADING_LAYER (SET "_ENVKIT_0123abcd_OLD_MKL_THREADING_LAYER=%MKL_THREADING_LAYER%") ELSE (SET "_ENVKIT_0123abcd_OLD_MKL_THREADING_LAYER=")
@IF DEFINED ENVKIT_QUOTES (SET "_ENVKIT_0123abcd_OLD_ENVKIT_QUOTES=%ENVKIT_QUOTES%") ELSE (SET "_ENVKIT_0123abcd_OLD_ENVKIT_QUOTES=")
@IF DEFINED ENVKIT_SPECIAL (SET "_ENVKIT_0123abcd_OLD_ENVKIT_SPECIAL=%ENVKIT_SPECIAL%") ELSE (SET "_ENVKIT_0123abcd_OLD_ENVKIT_SPECIAL=")
@IF DEFINED ENVKIT_MULTILINE (SET "_ENVKIT_0123abcd_OLD_ENVKIT_MULTILINE=%ENVKIT_MULTILINE%") ELSE (SET "_ENVKIT_0123abcd_OLD_ENVKIT_MULTILINE=")
@IF DEFINED KMP_DUPLICATE_LIB_OK (SET "_ENVKIT_0123abcd_OLD_KMP_DUPLICATE_LIB_OK=%KMP_DUPLICATE_LIB_OK%") ELSE (SET "_ENVKIT_0123abcd_OLD_KMP_DUPLICATE_LIB_OK=")
@IF DEFINED PATH (SET "_ENVKIT_0123abcd_OLD_PATH=%PATH%") ELSE (SET "_ENVKIT_0123abcd_OLD_PATH=")
@IF DEFINED PSModulePath (SET "_ENVKIT_0123abcd_OLD_PSModulePath=%PSModulePath%") ELSE (SET "_ENVKIT_0123abcd_OLD_PSModulePath=")
@SET "_ENVKIT_0123abcd_ACTIVE=1"
:envkit_0123abcd_apply
@SET "MKL_THREADING_LAYER=GNU"
@ECHO envkit: ENVKIT_QUOTES holds a double quote, which cmd.exe cannot take safely; it was not set 1>&2
@SET "ENVKIT_SPECIAL=it's 100%% & more ^ | < > (x) !x! $env:HOME `n"
@ECHO envkit: ENVKIT_MULTILINE holds a newline, which cmd.exe cannot take safely; it was not set 1>&2
@SET "KMP_DUPLICATE_LIB_OK="
@SET "_envkit_t=;%PATH%;"
@SET "_envkit_t=%_envkit_t:;C:\tools\bin;=;%"
@SET "_envkit_t=%_envkit_t:;C:\tools\bin;=;%"
@SET "_envkit_t=%_envkit_t:;C:\tools\bin;=;%"
@SET "_envkit_t=%_envkit_t:;D:\x y;=;%"
@SET "_envkit_t=%_envkit_t:;D:\x y;=;%"
@SET "_envkit_t=%_envkit_t:;D:\x y;=;%"
@SET "_envkit_t=%_envkit_t:;;=;%"
@SET "_envkit_t=%_envkit_t:;;=;%"
@SET "_envkit_t=%_envkit_t:;;=;%"
@SET "_envkit_t=%_envkit_t:~1,-1%"
@IF DEFINED _envkit_t (SET "PATH=C:\tools\bin;D:\x y;%_envkit_t%") ELSE (SET "PATH=C:\tools\bin;D:\x y")
@SET "_envkit_t="
@SET "_envkit_t=;%PSModulePath%;"
@SET "_envkit_t=%_envkit_t:;C:\mods;=;%"
@SET "_envkit_t=%_envkit_t:;C:\mods;=;%"
@SET "_envkit_t=%_envkit_t:;C:\mods;=;%"
@SET "_envkit_t=%_envkit_t:;;=;%"
@SET "_envkit_t=%_envkit_t:;;=;%"
@SET "_envkit_t=%_envkit_t:;;=;%"
@SET "_envkit_t=%_envkit_t:~1,-1%"
@IF DEFINED _envkit_t (SET "PSModulePath=%_envkit_t%;C:\mods") ELSE (SET "PSModulePath=C:\mods")
@SET "_envkit_t="
@EXIT /B 0
